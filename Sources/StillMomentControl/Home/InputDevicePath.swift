// The one guard for a device path given by the user before it reaches the kernel or a C
// library: an absolute path under /dev/input (or under `STILLMOMENT_INPUT_ROOT`, set by
// tests), without `..`, whose links (by-path, by-id) resolve inside the same folder, to a
// character device (or, under a test root, a FIFO: a pipe that carries input events).
import Glibc
import StillMomentCore

public struct InputDevicePath: Sendable, Equatable {
    /// The path as given (kept: a by-path link survives a replug, its target may not).
    public let path: String
    /// The folder devices must be in: /dev/input (another only in tests).
    let root: String

    /// /dev/input, or `STILLMOMENT_INPUT_ROOT` where a test set it.
    public static var root: String { Environment.value("STILLMOMENT_INPUT_ROOT") ?? "/dev/input" }

    /// Checks the text (no file-system access): absolute, under the root, no `..` or `.`
    /// components, no control characters, at most 256 bytes.
    public init(_ text: String, root: String = InputDevicePath.root) throws(CoreError) {
        self.root = root
        func refuse(_ why: LocalizedText) -> CoreError { .badValue(option: "DEVICE", reason: why) }
        guard text.utf8.count <= 256, !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw refuse(both("a device path is at most 256 bytes of text", "ein Gerätepfad hat höchstens 256 Bytes Text"))
        }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard text.hasPrefix(root + "/"), !parts.dropFirst().contains(where: { $0 == ".." || $0 == "." || $0.isEmpty }) else {
            throw refuse(both("'\(Display.clean(text))' is not an input device: give a path under \(root) (e.g. /dev/input/by-path/…, /dev/input/event0)",
                              "'\(Display.clean(text))' ist kein Eingabegerät: gib einen Pfad unter \(root) an (z. B. /dev/input/by-path/…, /dev/input/event0)"))
        }
        path = text
    }

    /// What the path is now: resolved through its links, it must stay under the root (no
    /// link out of it) and be a character device (a FIFO under a test root).
    public func resolve() throws(CoreError) -> String {
        guard let real = realpath(path, nil) else {
            let e = errno
            throw CoreError.io(path: path, reason: e == ENOENT
                ? both("no such device (unplugged?)", "kein solches Gerät (ausgesteckt?)")
                : .same(String(cString: strerror(e))))
        }
        defer { free(real) }
        let resolved = String(cString: real)
        guard let realRoot = realpath(root, nil) else {
            throw CoreError.io(path: root, reason: .same(String(cString: strerror(errno))))
        }
        let rootText = String(cString: realRoot)
        free(realRoot)
        guard resolved.hasPrefix(rootText + "/") else {
            throw CoreError.badValue(option: "DEVICE", reason: both("'\(Display.clean(path))' leads out of \(root) (to \(Display.clean(resolved)))",
                                                                    "'\(Display.clean(path))' führt aus \(root) hinaus (nach \(Display.clean(resolved)))"))
        }
        var st = stat()
        guard stat(resolved, &st) == 0 else { throw CoreError.io(path: resolved, reason: .same(String(cString: strerror(errno)))) }
        let type = st.st_mode & S_IFMT
        let testRoot = root != "/dev/input"
        guard type == S_IFCHR || (testRoot && type == S_IFIFO) else {
            throw CoreError.badValue(option: "DEVICE", reason: both("'\(Display.clean(path))' is not a character device", "'\(Display.clean(path))' ist kein zeichenorientiertes Gerät"))
        }
        return resolved
    }
}
