// An LED through sysfs (`/sys/class/leds/NAME`: the Pi's gpio-led overlay, or any LED the
// kernel knows): on while sitting, a slow blink (the kernel's `timer` trigger, 1 s on, 1 s
// off) in the preparation and while paused, off otherwise. Off by default (setting `led`).
// The root is `STILLMOMENT_LEDS` when set (the tests' file tree shaped like sysfs).
import FoundationEssentials
import Glibc
import Logging
import StillMomentCore

/// The setting's value: empty (no LED) or a name sysfs gives an LED (no path: letters,
/// digits, `:`, `_`, `-`, `.`, `+`; not `.` or `..`).
public struct LEDName: Sendable, Equatable {
    public let name: String?

    public init(_ text: String) throws(CoreError) {
        if text.isEmpty { name = nil; return }
        let allowed = text.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x3a || c == 0x5f || c == 0x2d || c == 0x2e || c == 0x2b
        }
        guard allowed, text.utf8.count <= 64, text != ".", text != ".." else {
            throw CoreError.badValue(option: "led", reason: both(
                "'\(Display.clean(String(text.prefix(64))))' is not an LED's name (as in /sys/class/leds: letters, digits, ':', '_', '-', '.')",
                "'\(Display.clean(String(text.prefix(64))))' ist kein Name einer LED (wie in /sys/class/leds: Buchstaben, Ziffern, ':', '_', '-', '.')"))
        }
        name = text
    }
}

final class LED {
    /// What the LED shows.
    enum Look: Equatable { case off, on, blink }

    /// The look for the daemon's status: on while a session sounds, blinking in the
    /// preparation and while paused (or starting), off when idle.
    static func look(_ status: Status) -> Look {
        if status.isPaused { return .blink }
        switch status.state {
        case .idle, .completed, .stopped: return .off
        case .starting, .preparation: return .blink
        case .startGong, .running, .endGong, .playing, .bell: return .on
        }
    }

    private let folder: String
    private let log: Logger
    private var shown: Look?
    private var failed = false

    init(name: String, log: Logger, root: String? = nil) {
        let base = root ?? Environment.value("STILLMOMENT_LEDS") ?? "/sys/class/leds"
        folder = base + "/" + name
        self.log = log
    }

    /// Shows `look` (written only when it changes).
    func show(_ look: Look) {
        guard look != shown else { return }
        shown = look
        let ok: Bool
        switch look {
        case .off: ok = write("trigger", "none") && write("brightness", "0")
        case .on: ok = write("trigger", "none") && write("brightness", maxBrightness())
        case .blink: ok = write("trigger", "timer") && write("delay_on", "1000") && write("delay_off", "1000")
        }
        if ok { failed = false }
    }

    private func maxBrightness() -> String {
        let fd = open(folder + "/max_brightness", O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return "1" }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: 16)
        let n = read(fd, &buf, buf.count)
        let text = n > 0 ? String(decoding: buf[0..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : ""
        return Int(text).map { String(max(1, $0)) } ?? "1"
    }

    /// Writes one attribute (an existing file only: sysfs makes them). The first failure
    /// is logged (with what to do), until a write works again.
    private func write(_ attribute: String, _ value: String) -> Bool {
        let path = folder + "/" + attribute
        let fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_TRUNC)
        var e = errno
        if fd >= 0 {
            let bytes = Array(value.utf8)
            let n = Glibc.write(fd, bytes, bytes.count)
            e = errno
            close(fd)
            if n == bytes.count { return true }
        }
        if !failed {
            failed = true
            let hint = e == EACCES ? " (the LED's files belong to root: a udev rule or the gpio group lets the daemon write them)" : ""
            log.error("LED: cannot write \(path): \(String(cString: strerror(e)))\(hint)")
        }
        return false
    }
}
