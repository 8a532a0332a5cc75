// What a button (or any front-end given an action as a line of text) asks of the daemon:
// the one parser from "timer --preset morning", "pause", "toggle", "finish", "stop",
// "ring-now 3", "play NAME" to the typed `Request` every front-end sends. Timer options are
// checked here by Core's one parser of them, so a bad action is refused when it is stored.
import StillMomentCore

public enum ButtonAction: Sendable, Equatable {
    case request(Request)
    /// Pause when playing, resume when paused (or a guided meditation kept to resume).
    case toggle

    /// The words taken, for the help and the refusal.
    public static let forms = "timer [DURATION] [--preset NAME] [--OPTION VALUE …] | play MEDITATION | pause | resume | toggle | finish | stop | ring-now ID"

    public init(parsing text: String) throws(CoreError) {
        let words = try ShellWords.split(text)
        guard let verb = words.first else {
            throw CoreError.badRequest(both("an action is empty; one of: \(Self.forms)", "eine Aktion ist leer; eine von: \(Self.forms)"))
        }
        let rest = Array(words.dropFirst())
        func none() throws(CoreError) {
            guard rest.isEmpty else {
                throw CoreError.badRequest(both("'\(verb)' takes nothing after it", "'\(verb)' nimmt nichts danach"))
            }
        }
        switch verb {
        case "pause": try none(); self = .request(.pause)
        case "resume": try none(); self = .request(.resume)
        case "toggle", "pause-resume": try none(); self = .toggle
        case "finish": try none(); self = .request(.finish)
        case "stop": try none(); self = .request(.stop)
        case "ring-now":
            guard rest.count == 1, let id = Int64(rest[0]), id > 0 else {
                throw CoreError.badRequest(both("ring-now takes a schedule entry's id", "ring-now nimmt die Nummer eines Plan-Eintrags"))
            }
            self = .request(.ringNow(id: id))
        case "play":
            guard rest.count == 1, !rest[0].isEmpty, rest[0].utf8.count <= 1024 else {
                throw CoreError.badRequest(both("play takes one meditation (its name or id)", "play nimmt eine Meditation (ihren Namen oder ihre Nummer)"))
            }
            self = .request(.play(PlayRequest(id: rest[0])))
        case "timer":
            self = .request(.timer(try Self.timer(rest)))
        default:
            throw CoreError.badRequest(both("unknown action '\(Display.clean(String(verb.prefix(40))))'; one of: \(Self.forms)",
                                            "unbekannte Aktion '\(Display.clean(String(verb.prefix(40))))'; eine von: \(Self.forms)"))
        }
    }

    /// `timer [DURATION] [--preset NAME] [--OPTION VALUE | --OPTION=VALUE]…`, its options
    /// checked by `TimerRequest(text:)`.
    private static func timer(_ words: [String]) throws(CoreError) -> TimerStartRequest {
        var preset: String?, options: [String: String] = [:]
        var i = 0
        while i < words.count {
            let word = words[i]
            i += 1
            guard word.hasPrefix("--") else {
                guard options["duration"] == nil else {
                    throw CoreError.badRequest(both("timer: one duration only, not '\(Display.clean(word))'", "timer: nur eine Dauer, nicht '\(Display.clean(word))'"))
                }
                options["duration"] = word
                continue
            }
            var key = String(word.dropFirst(2)), value: String
            if let eq = key.firstIndex(of: "=") {
                value = String(key[key.index(after: eq)...])
                key = String(key[..<eq])
            } else {
                guard i < words.count else {
                    throw CoreError.badRequest(both("timer: --\(Display.clean(key)) needs a value", "timer: --\(Display.clean(key)) braucht einen Wert"))
                }
                value = words[i]
                i += 1
            }
            if key == "preset" { preset = value } else { options[key] = value }
        }
        guard (preset?.utf8.count ?? 0) <= 256 else {
            throw CoreError.badValue(option: "preset", reason: both("a preset's name is at most 256 bytes", "der Name einer Voreinstellung hat höchstens 256 Bytes"))
        }
        let request = TimerStartRequest(preset: preset, options: options)
        _ = try request.request()
        return request
    }

    /// The request to send, given the daemon's status (only `toggle` looks at it).
    public func request(status: Status) -> Request {
        switch self {
        case .request(let r): return r
        case .toggle: return status.isPaused || (status.isIdle && status.suspended != nil) ? .resume : .pause
        }
    }
}
