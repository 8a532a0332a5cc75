import ArgumentParser
import Glibc
import StillMomentControl
import StillMomentCore

/// Follows one session in the daemon. On a terminal: the live line, redrawn from the
/// daemon's progress events, and keys that control the session (q stops it; d, Ctrl-C,
/// a closed terminal or a killed client only detach: the session plays on). Without a
/// terminal: one line per change. Returns the exit code once the session ends.
struct Attachment {
    let client: ControlClient
    let session: Int
    var status: JSON

    init(client: ControlClient, session: Int, status: JSON) {
        self.client = client
        self.session = session
        self.status = status
    }

    mutating func run() -> Int32 {
        let signals = StopFlag.interactive()
        let interactive = Console.isTerminal
        let view = TerminalView(interactive: interactive)
        defer { view.restore() }
        var lastPlain = ""
        while true {
            if signals.received != nil {
                if interactive { view.finishLine(StatusText.live(status, keys: false)) }
                Console.out(Texts.text("detached", []))
                return 0
            }
            if interactive {
                view.show(StatusText.live(status, keys: true))
            } else {
                let line = StatusText.summary(status)
                if StatusText.changeKey(status) != lastPlain {
                    lastPlain = StatusText.changeKey(status)
                    Console.out(line)
                }
            }
            do {
                if interactive, let key = view.key(timeoutMs: 30) {
                    switch key {
                    case .space:
                        status = try client.request(status["paused"] == .bool(true) ? .resume : .pause)
                    case .left: status = try client.request(.seek, ["by": .number(-15_000)])
                    case .right: status = try client.request(.seek, ["by": .number(15_000)])
                    case .quit: try client.request(.stop)
                    case .finish: if status["source"]?.string == "timer" { status = try client.request(.finish) }
                    case .detach:
                        view.finishLine(StatusText.live(status, keys: false))
                        Console.out(Texts.text("detached", []))
                        return 0
                    }
                }
                guard let event = try client.nextEvent(timeoutMs: interactive ? 70 : 200) else { continue }
                let data = event["data"] ?? .null
                switch event["event"]?.string {
                case "ended" where data["session"]?.number == Double(session):
                    if interactive { view.finishLine(StatusText.live(status, keys: false)) }
                    return ended(data)
                case "progress", "state":
                    if data["session"]?.number == Double(session) { status = data }
                default:
                    break
                }
            } catch {
                if case .refused(_, let message) = error {
                    // A key the session cannot take (seek in a timer): say so and go on.
                    if interactive { view.finishLine(StatusText.live(status, keys: false)) }
                    Console.err(message)
                    continue
                }
                if interactive { view.finishLine(StatusText.live(status, keys: false)) }
                Console.error(error.description)
                return Exit.failure
            }
        }
    }

    /// The last line: how and why the session ended.
    private func ended(_ data: JSON) -> Int32 {
        let source = data["source"]?.string ?? ""
        let position = data["position"]?.number.map { tr(" at ", " bei ") + TimeText.clock(Int64($0)) } ?? ""
        switch data["reason"]?.string {
        case "completed":
            Console.out(TimerState.completed.name())
        case "stopped":
            Console.out(TimerState.stopped.name() + position)
        case "replaced":
            Console.out(source == "timer" ? tr("stopped: a new timer replaced it", "abgebrochen: ein neuer Timer hat ihn abgelöst")
                                          : tr("stopped: a new session replaced it", "abgebrochen: eine neue Sitzung hat sie abgelöst"))
        case "preempted":
            let by = data["by"]?.string ?? ""
            // The taker, and the pronoun that stands for it in German.
            let (taker, it): (String, String) = by == "timer" ? (tr("a timer", "ein Timer"), "er")
                : by == "preview" ? (tr("a preview", "eine Vorschau"), "sie")
                : (tr("a guided meditation", "eine geführte Meditation"), "sie")
            if source == "guided" {
                Console.out(tr("paused\(position): \(taker) took the sound; `stillmoment resume` continues once it ends",
                               "pausiert\(position): \(taker) hat die Wiedergabe übernommen; `stillmoment resume` macht weiter, sobald \(it) endet"))
            } else {
                Console.out(tr("stopped: \(taker) took the sound", "abgebrochen: \(taker) hat die Wiedergabe übernommen"))
            }
        default:
            Console.error(data["message"]?.string ?? tr("the session failed", "die Sitzung ist fehlgeschlagen"))
            return Exit.failure
        }
        return 0
    }
}

/// Status objects as text.
enum StatusText {
    /// One line for `status`, `pause` … and for scripts following a session.
    static func summary(_ s: JSON) -> String {
        let paused = s["paused"] == .bool(true) ? " (\(Texts.text("paused", [])))" : ""
        switch s["source"]?.string {
        case "timer":
            let state = s["state"]?.string.flatMap(TimerState.init(rawValue:)) ?? .running
            let timer = tr("timer", "Timer")
            if state == .preparation {
                return "\(timer): \(state.name())\(paused)  \(Texts.text("starts in", [clock(s["remaining"])]))"
            }
            var parts = ["\(timer): \(state.name())\(paused)", Texts.text("elapsed", [clock(s["elapsed"])])]
            if s["remaining"] != nil { parts.append(Texts.text("left", [clock(s["remaining"])])) }
            if let section = sectionText(s) { parts.append(section) }
            if let next = s["nextGong"] { parts.append(Texts.text("next gong", [clock(next)])) }
            return parts.joined(separator: "  ")
        case "guided", "preview":
            let m = s["meditation"] ?? .null
            let who = (m["teacher"]?.string).map { $0.isEmpty ? "" : "\($0) – " } ?? ""
            let verb = s["source"]?.string == "preview" ? tr("preview", "Vorschau")
                : s["state"]?.string == "preparation" ? tr("preparing", "Vorbereitung")
                : s["state"]?.string == "startGong" ? tr("start gong", "Startgong") : tr("playing", "Wiedergabe")
            if let startsIn = s["startsIn"] {
                return "\(verb)\(paused): \(who)\(m["name"]?.string ?? "")  \(Texts.text("starts in", [clock(startsIn)]))"
            }
            return "\(verb)\(paused): \(who)\(m["name"]?.string ?? "")  \(clock(s["position"])) / \(clock(s["duration"]))"
        default:
            guard let next = s["nextScheduled"], let at = next["at"]?.string, let t = LocalTime(iso8601: at) else {
                return tr("idle", "nichts läuft")
            }
            let what = next["name"]?.string ?? next["action"]?.string ?? ""
            return tr("idle; next \(PracticeText.when(t)): \(what)", "nichts läuft; als Nächstes \(PracticeText.when(t)): \(what)")
        }
    }

    /// The section playing: `walk 2/3, 04:10 left`.
    static func sectionText(_ s: JSON) -> String? {
        guard let section = s["section"], let kind = section["kind"]?.string,
              let index = section["index"]?.number, let count = section["count"]?.number else { return nil }
        return Texts.sectionLine(kind: kind, index: Int(index), count: Int(count),
                                 remaining: Int64(section["remaining"]?.number ?? 0))
    }

    /// What a script's line changes with (not the clock).
    static func changeKey(_ s: JSON) -> String {
        "\(s["source"]?.string ?? "")|\(s["state"]?.string ?? "")|\(s["paused"] == .bool(true))|\(s["section"]?["index"]?.number ?? -1)"
    }

    /// The live line on a terminal.
    static func live(_ s: JSON, keys: Bool) -> String {
        let icon = s["paused"] == .bool(true) ? "⏸" : "▶"
        var line: String
        if s["source"]?.string == "timer" {
            let state = s["state"]?.string.flatMap(TimerState.init(rawValue:)) ?? .running
            var parts = ["\(icon) \(state.name())"]
            if state == .preparation {
                parts.append(Texts.text("starts in", [clock(s["remaining"])]))
            } else {
                parts.append(Texts.text("elapsed", [clock(s["elapsed"])]))
                if s["remaining"] != nil { parts.append(Texts.text("left", [clock(s["remaining"])])) }
                if let section = sectionText(s) { parts.append(section) }
                if let next = s["nextGong"] { parts.append(Texts.text("next gong", [clock(next)])) }
            }
            line = parts.joined(separator: "   ")
            if keys { line += "   " + Texts.text("attached keys", []) }
        } else {
            let m = s["meditation"] ?? .null
            let total = s["duration"]?.number ?? 0
            let pos = s["position"]?.number ?? 0
            let width = 30
            let filled = total > 0 ? min(width, Int(Double(width) * pos / total)) : 0
            if let startsIn = s["startsIn"] {
                // The preparation and the start gong: the phase and a countdown to the voice.
                let phase = s["state"]?.string == "startGong" ? TimerState.startGong.name() : TimerState.preparation.name()
                line = "\(icon) \(m["name"]?.string ?? "")  \(phase)  \(Texts.text("starts in", [clock(startsIn)]))"
            } else {
                line = "\(icon) \(m["name"]?.string ?? "")  [\(String(repeating: "=", count: filled))\(String(repeating: " ", count: width - filled))] \(clock(s["position"])) / \(clock(s["duration"]))"
            }
            if keys { line += "   " + Texts.text("guided keys", []) }
        }
        return line
    }

    private static func clock(_ v: JSON?) -> String { TimeText.clock(Int64(v?.number ?? 0)) }
}
