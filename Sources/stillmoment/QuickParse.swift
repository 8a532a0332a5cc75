// The command lines typed most (status, pause, resume, stop, finish, seek, a timer or a
// meditation for the daemon, the daemon itself) read without ArgumentParser. Its first
// parse in a process builds every argument's metadata by reflection: of the 18.6 M
// instructions of `stillmoment pause`, 11.4 M, and of the 29.1 M of `stillmoment timer 1m
// --preparation off --device null --detach`, 20.6 M (callgrind, this project's release
// build), which an emulated guest or a small board pays many times over before the
// request leaves. Only plain forms are read here: help, a flag or option this does not
// know, a repeated one, `--`, an empty value or one that would be refused goes to
// ArgumentParser, which reads it and words the error. StillMomentCLITests check that every
// form read here gives the same Invocation as ArgumentParser.
import StillMomentCore

enum QuickParse {
    /// The invocation for a plain command line (after Arguments.normalized), or nil.
    static func invocation(_ args: [String]) -> Invocation? {
        guard let command = args.first else { return nil }
        let rest = Array(args.dropFirst())
        switch command {
        case "status":
            if rest.isEmpty { return .status(json: false) }
            return rest == ["--json"] ? .status(json: true) : nil
        case "pause": return rest.isEmpty ? .request(.pause) : nil
        case "resume": return rest.isEmpty ? .request(.resume) : nil
        case "stop": return rest.isEmpty ? .request(.stop) : nil
        case "finish": return rest.isEmpty ? .request(.finish) : nil
        case "seek":
            // `seek -15s` arrives as `seek -- -15s`.
            if rest.count == 1, let target = rest.first, plainWord(target) { return .seek(target: target) }
            if rest.count == 2, rest[0] == "--", !rest[1].isEmpty, !rest[1].hasPrefix("--") { return .seek(target: rest[1]) }
            return nil
        case "daemon":
            if rest.isEmpty { return .daemon(onDemand: false, readyFD: nil) }
            if rest == ["--on-demand"] { return .daemon(onDemand: true, readyFD: nil) }
            // How a client starts one: `daemon --on-demand --ready-fd 3`.
            if rest.count == 3, rest[0] == "--on-demand", rest[1] == "--ready-fd", let fd = Int32(rest[2]), fd >= 0 {
                return .daemon(onDemand: true, readyFD: fd)
            }
            return nil
        case "timer": return timer(rest)
        case "play": return play(rest)
        default: return nil
        }
    }

    /// A word that is a value, not an option, `--` or a word ArgumentParser treats itself.
    private static func plainWord(_ word: String) -> Bool {
        !word.isEmpty && !word.hasPrefix("-") && word != "help"
    }

    /// Options (`--name value` or `--name=value`), flags and at most one positional word,
    /// each once; nil for anything else.
    private struct Words {
        var options: [String: String] = [:]
        var flags: Set<String> = []
        var positional: String?

        init?(_ words: [String], options known: Set<String>, flags knownFlags: Set<String>) {
            var i = 0
            while i < words.count {
                let word = words[i]
                i += 1
                guard word.hasPrefix("--") else {
                    guard plainWord(word), positional == nil else { return nil }
                    positional = word
                    continue
                }
                let body = word.dropFirst(2)
                if let eq = body.firstIndex(of: "=") {
                    let name = String(body[..<eq]), value = String(body[body.index(after: eq)...])
                    guard known.contains(name), !value.isEmpty, options[name] == nil else { return nil }
                    options[name] = value
                } else if knownFlags.contains(String(body)) {
                    guard flags.insert(String(body)).inserted else { return nil }
                } else {
                    let name = String(body)
                    guard known.contains(name), options[name] == nil, i < words.count, plainWord(words[i]) else { return nil }
                    options[name] = words[i]
                    i += 1
                }
            }
        }
    }

    /// The timer's options by their long names (TimerOption's raw values).
    static let timerOptions: Set<String> = Set(TimerOptions.all.map(\.rawValue))

    /// `timer [DURATION] [--OPTION VALUE]… [--preset NAME] [--detach]`
    private static func timer(_ words: [String]) -> Invocation? {
        guard let w = Words(words, options: timerOptions.union(["preset"]), flags: ["detach"]) else { return nil }
        var options = w.options
        let preset = options.removeValue(forKey: "preset")
        guard let text = try? TimerCommand.optionText(duration: w.positional, options: options) else { return nil }
        return TimerCommand.daemonSession(duration: w.positional, options: text, preset: preset,
                                          detach: w.flags.contains("detach"))
    }

    /// `play ID [--preparation TIME] [--from TIME] [--resume] [--device NAME] [--detach]`
    private static func play(_ words: [String]) -> Invocation? {
        guard let w = Words(words, options: ["preparation", "from", "device"], flags: ["resume", "detach"]),
              let id = w.positional else { return nil }
        let resume = w.flags.contains("resume")
        if w.options["from"] != nil && resume { return nil }
        return try? PlayCommand.daemonSession(id: id, preparation: w.options["preparation"], from: w.options["from"],
                                              resume: resume, device: w.options["device"], detach: w.flags.contains("detach"))
    }
}
