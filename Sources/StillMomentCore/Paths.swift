import FoundationEssentials
import Glibc
import StillMomentAudio

/// Where stillmoment keeps its files.
public enum Paths {
    /// `$STILLMOMENT_HOME`, else `$XDG_DATA_HOME/stillmoment`, else `~/.local/share/stillmoment`.
    public static var home: String {
        let env = ProcessInfo.processInfo.environment
        if let h = env["STILLMOMENT_HOME"], !h.isEmpty { return h }
        if let x = env["XDG_DATA_HOME"], !x.isEmpty { return x + "/stillmoment" }
        return (env["HOME"] ?? "/tmp") + "/.local/share/stillmoment"
    }

    public static var settingsFile: String { home + "/settings.json" }

    /// Creates a folder (and its parents) with the given mode.
    public static func makeFolder(_ path: String, mode: mode_t = 0o700) throws(CoreError) {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            if mkdir(current, mode) != 0 && errno != EEXIST {
                throw CoreError.io(path: current, reason: String(cString: strerror(errno)))
            }
        }
    }

    /// The bundled sounds: `$STILLMOMENT_SOUNDS`, else `share/stillmoment/Sounds` beside
    /// the installed binary, else a `Sounds` folder above the binary (a build in the
    /// source tree), else the usual install prefixes.
    public static var sounds: String? {
        let env = ProcessInfo.processInfo.environment
        var candidates: [String] = []
        if let s = env["STILLMOMENT_SOUNDS"], !s.isEmpty { candidates.append(s) }
        if let exe = executableDirectory {
            candidates.append(exe + "/../share/stillmoment/Sounds")
            var dir = exe
            for _ in 0..<6 {
                candidates.append(dir + "/Sounds")
                dir += "/.."
            }
        }
        candidates += ["/usr/local/share/stillmoment/Sounds", "/usr/share/stillmoment/Sounds"]
        return candidates.first { access($0 + "/sounds.json", R_OK) == 0 }
    }

    static var executableDirectory: String? {
        var buf = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buf, buf.count - 1)
        guard n > 0 else { return nil }
        let path = String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = path.lastIndex(of: "/") else { return nil }
        return String(path[..<slash])
    }
}

/// Errors of the core layer; each reads as one line.
public enum CoreError: Error, Equatable, Sendable, CustomStringConvertible {
    case io(path: String, reason: String)
    case invalid(String)
    case unknownSound(id: String, kind: String, valid: [String])
    case noSounds
    /// The sound device cannot be opened (or was lost): ALSA's reason and a hint.
    case device(DeviceError)

    /// One line, whatever a user, a file or a device put into it.
    public var description: String { Display.clean(text) }

    private var text: String {
        switch self {
        case .device(let error): return error.description
        case .io(let path, let reason): return "\(path): \(reason)"
        case .invalid(let message): return message
        case .unknownSound(let id, let kind, let valid):
            return "unknown \(kind) '\(id)'; choose one of: \(valid.joined(separator: ", "))"
        case .noSounds:
            return "the bundled sounds are missing (no Sounds/sounds.json found); set STILLMOMENT_SOUNDS to their folder or reinstall"
        }
    }
}
