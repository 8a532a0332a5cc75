import FoundationEssentials
import Glibc
import StillMomentAudio

/// Where stillmoment keeps its files.
public enum Paths {
    /// `$STILLMOMENT_HOME`, else `$XDG_DATA_HOME/stillmoment`, else `~/.local/share/stillmoment`.
    public static var home: String {
        if let h = Environment.value("STILLMOMENT_HOME") { return h }
        if let x = Environment.value("XDG_DATA_HOME") { return x + "/stillmoment" }
        return (Environment.value("HOME") ?? "/tmp") + "/.local/share/stillmoment"
    }

    public static var settingsFile: String { home + "/settings.json" }

    /// Creates a folder (and its parents) with the given mode.
    public static func makeFolder(_ path: String, mode: mode_t = 0o700) throws(CoreError) {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            if mkdir(current, mode) != 0 && errno != EEXIST {
                throw CoreError.io(path: current, reason: .systemError)
            }
        }
    }

    /// The bundled sounds: `$STILLMOMENT_SOUNDS`, else `share/stillmoment/Sounds` beside
    /// the installed binary, else a `Sounds` folder above the binary (a build in the
    /// source tree), else the usual install prefixes.
    public static var sounds: String? {
        var candidates: [String] = []
        if let s = Environment.value("STILLMOMENT_SOUNDS") { candidates.append(s) }
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

    /// This program's own executable (for starting the daemon or a child of it).
    public static var executable: String? {
        var buf = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buf, buf.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static var executableDirectory: String? {
        guard let path = executable, let slash = path.lastIndex(of: "/") else { return nil }
        return String(path[..<slash])
    }
}

/// What kind of failure an error is: it decides the exit code (and the protocol's code)
/// in one place, whoever meets the error.
public enum ErrorCategory: Sendable, Equatable {
    /// Bad input: an argument, a setting, a request (exit 2, `bad-arguments`).
    case badInput
    /// Something failed that the input did not cause: a disk, a damaged file (exit 1).
    case failure
    /// The sound device cannot be opened or was lost (exit 3).
    case device
}

/// Errors of the core layer; each reads as one line.
public enum CoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Reading or writing a file or the catalog failed.
    case io(path: String, reason: LocalizedText)
    /// A value given by the user (an option, a setting, a request's field) is not usable:
    /// the option's name and what is wrong with the value.
    case badValue(option: String, reason: LocalizedText)
    /// Options or arguments that cannot go together, or a request that makes no sense.
    case badRequest(LocalizedText)
    /// No meditation (or other entry) answers to the key; `hint` says what else to try.
    case notFound(key: String, hint: LocalizedText)
    /// The key matches several entries.
    case ambiguous(key: String, matches: [String])
    /// A file that cannot be imported or played: not audio, damaged, changed meanwhile.
    case unplayable(path: String, reason: LocalizedText)
    /// Not enough room in the store for an import.
    case noSpace(path: String, home: String, needed: Int64, free: Int64)
    /// The catalog or a bundled file is damaged: `library verify` tells more.
    case damaged(LocalizedText)
    case unknownSound(id: String, kind: String, valid: [String])
    case noSounds
    /// The sound device cannot be opened (or was lost): ALSA's reason and a hint.
    case device(DeviceError)
    /// A preset or meditation that schedule entries use is to be deleted without `force`:
    /// what it is, and the entries ("3 (Morning sit)").
    case inUse(what: LocalizedText, entries: [String])

    public var category: ErrorCategory {
        switch self {
        case .badValue, .badRequest, .notFound, .ambiguous, .unknownSound, .inUse: return .badInput
        case .io, .unplayable, .noSpace, .damaged, .noSounds: return .failure
        case .device: return .device
        }
    }

    /// One line in the user's language, whatever a user, a file or a device put into it.
    public var description: String { text(.current) }

    /// One line in `language` (the edge that shows it: the CLI for its user, the daemon for
    /// the client that asked, the web app for the browser).
    public func text(_ language: Language) -> String { Display.clean(raw(language)) }

    /// The message in both languages.
    public var words: LocalizedText { LocalizedText(en: text(.en), de: text(.de)) }

    private func raw(_ language: Language) -> String {
        let de = language == .de
        switch self {
        case .device(let error): return error.text(language)
        case .io(let path, let reason): return "\(path): \(reason.text(language))"
        case .badValue(let option, let reason): return option.isEmpty ? reason.text(language) : "\(option): \(reason.text(language))"
        case .badRequest(let message): return message.text(language)
        case .notFound(let key, let hint):
            return (de ? "keine Meditation '\(key)' in der Bibliothek (siehe `stillmoment list`)"
                       : "no meditation '\(key)' in the library (see `stillmoment list`)") + hint.text(language)
        case .ambiguous(let key, let matches):
            return de ? "'\(key)' passt auf mehrere Meditationen: \(matches.joined(separator: ", ")); gib mehr von der Kennung an"
                      : "'\(key)' matches several meditations: \(matches.joined(separator: ", ")); give more of the id"
        case .unplayable(let path, let reason): return path.isEmpty ? reason.text(language) : "\(path): \(reason.text(language))"
        case .noSpace(let path, let home, let needed, let free):
            return de ? "\(path): nicht genug Platz in \(home) (\(needed / 1_000_000) MB nötig, \(free / 1_000_000) MB frei)"
                      : "\(path): not enough space in \(home) (\(needed / 1_000_000) MB needed, \(free / 1_000_000) MB free)"
        case .damaged(let message): return message.text(language)
        case .unknownSound(let id, let kind, let valid):
            return de ? "unbekannter Klang '\(id)' (\(kind)); wähle einen von: \(valid.joined(separator: ", "))"
                      : "unknown \(kind) '\(id)'; choose one of: \(valid.joined(separator: ", "))"
        case .inUse(let w, let entries):
            let what = w.text(language)
            let list = entries.joined(separator: ", ")
            return de ? "\(what) wird vom Zeitplan benutzt (\(entries.count == 1 ? "Eintrag" : "Einträge") \(list)): entferne \(entries.count == 1 ? "ihn" : "sie") zuerst oder lösche trotzdem (--force), dann \(entries.count == 1 ? "ist er" : "sind sie") kaputt"
                      : "\(what) is used by the schedule (\(entries.count == 1 ? "entry" : "entries") \(list)): remove \(entries.count == 1 ? "it" : "them") first, or delete anyway (--force) and \(entries.count == 1 ? "it shows" : "they show") as broken"
        case .noSounds:
            return de ? "die mitgelieferten Klänge fehlen (keine Sounds/sounds.json gefunden); setze STILLMOMENT_SOUNDS auf ihren Ordner oder installiere neu"
                      : "the bundled sounds are missing (no Sounds/sounds.json found); set STILLMOMENT_SOUNDS to their folder or reinstall"
        }
    }
}

extension CoreError {
    /// An error of the audio layer met by the core: the device's stays a device error,
    /// a file's is a file that cannot be played.
    public static func audio(_ error: AudioError, path: String = "") -> CoreError {
        if case .device(let device) = error { return .device(device) }
        return .unplayable(path: "", reason: error.words)
    }
}
