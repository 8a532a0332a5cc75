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
    var status: Status

    init(client: ControlClient, session: Int, status: Status) {
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
                        status = try client.send(status.isPaused ? .resume : .pause)
                    // From the moment the key was read.
                    case .left: status = try client.send(.seek(.by(-15_000, at: SeekRequest.stampNow())))
                    case .right: status = try client.send(.seek(.by(15_000, at: SeekRequest.stampNow())))
                    case .quit: try client.send(.stop)
                    case .finish: if status.source == .timer { status = try client.send(.finish) }
                    case .detach:
                        view.finishLine(StatusText.live(status, keys: false))
                        Console.out(Texts.text("detached", []))
                        return 0
                    }
                }
                // A session that ended before this view saw its event (it failed to start
                // on a busy device) is in the status's last end.
                if let last = status.lastEnded, last.session == session, status.session != session {
                    if interactive { view.finishLine(StatusText.live(status, keys: false)) }
                    return ended(last)
                }
                guard let event = try client.nextTypedEvent(timeoutMs: interactive ? 70 : 200) else { continue }
                switch event {
                case .ended(let e) where e.session == session:
                    if interactive { view.finishLine(StatusText.live(status, keys: false)) }
                    return ended(e)
                case .progress(let s), .state(let s):
                    if s.session == session { status = s }
                default:
                    break
                }
            } catch {
                if case .refused(_, let words) = error {
                    let message = words.text()
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
    private func ended(_ e: Ended) -> Int32 {
        let position = e.position.map { tr(" at ", " bei ") + TimeText.clock($0) } ?? ""
        switch e.reason {
        case .completed, .finished:
            Console.out(TimerState.completed.name())
        case .stopped:
            Console.out(TimerState.stopped.name() + position)
        case .replaced:
            Console.out(e.source == .timer ? tr("stopped: a new timer replaced it", "abgebrochen: ein neuer Timer hat ihn abgelöst")
                                           : tr("stopped: a new session replaced it", "abgebrochen: eine neue Sitzung hat sie abgelöst"))
        case .preempted:
            // The taker, and the pronoun that stands for it in German.
            let (taker, it): (String, String) = e.by == .timer ? (tr("a timer", "ein Timer"), "er")
                : e.by == .preview ? (tr("a preview", "eine Vorschau"), "sie")
                : e.by == .bell ? (tr("a bell", "eine Glocke"), "sie")
                : (tr("a guided meditation", "eine geführte Meditation"), "sie")
            if e.source == .guided {
                Console.out(tr("paused\(position): \(taker) took the sound; `stillmoment resume` continues once it ends",
                               "pausiert\(position): \(taker) hat die Wiedergabe übernommen; `stillmoment resume` macht weiter, sobald \(it) endet"))
            } else {
                Console.out(tr("stopped: \(taker) took the sound", "abgebrochen: \(taker) hat die Wiedergabe übernommen"))
            }
        case .failed:
            Console.error(e.message?.text() ?? tr("the session failed", "die Sitzung ist fehlgeschlagen"))
            return e.code == .device ? Exit.device : Exit.failure
        }
        return 0
    }
}

/// Status objects as text.
enum StatusText {
    /// One line for `status`, `pause` … and for scripts following a session.
    static func summary(_ s: Status) -> String {
        let paused = s.isPaused ? " (\(Texts.text("paused", [])))" : ""
        switch s.source {
        case .timer? where s.state == .starting:
            return tr("timer: starting", "Timer: startet")
        case .timer?:
            let state = TimerState(rawValue: s.state.rawValue) ?? .running
            let timer = tr("timer", "Timer")
            if state == .preparation {
                return "\(timer): \(state.name())\(paused)  \(Texts.text("starts in", [clock(s.remaining)]))"
            }
            var parts = ["\(timer): \(state.name())\(paused)", Texts.text("elapsed", [clock(s.elapsed)])]
            if s.remaining != nil { parts.append(Texts.text("left", [clock(s.remaining)])) }
            if let section = sectionText(s) { parts.append(section) }
            if let next = s.nextGong { parts.append(Texts.text("next gong", [clock(next)])) }
            return parts.joined(separator: "  ")
        case .guided?, .preview?:
            let m = s.meditation
            let who = (m?.teacher).map { $0.isEmpty ? "" : "\($0) – " } ?? ""
            if s.state == .starting {
                guard let m, s.position != nil else { return tr("starting", "startet") }
                return "\(tr("starting", "startet"))\(paused): \(who)\(m.name)  \(clock(s.position)) / \(clock(s.duration))"
            }
            let verb = s.source == .preview ? tr("preview", "Vorschau")
                : s.state == .preparation ? tr("preparing", "Vorbereitung")
                : s.state == .startGong ? tr("start gong", "Startgong") : tr("playing", "Wiedergabe")
            if let startsIn = s.startsIn {
                return "\(verb)\(paused): \(who)\(m?.name ?? "")  \(Texts.text("starts in", [clock(startsIn)]))"
            }
            return "\(verb)\(paused): \(who)\(m?.name ?? "")  \(clock(s.position)) / \(clock(s.duration))"
        case .bell?:
            return tr("bell: \(s.sound ?? "")", "Glocke: \(s.sound ?? "")")
        case nil:
            let open = s.keptOpen.map { k in
                let device = Display.clean(k.device)
                return tr("; \(device) kept open", "; \(device) bleibt geöffnet")
            } ?? ""
            guard let next = s.nextScheduled, let t = LocalTime(iso8601: next.at) else {
                return tr("idle", "nichts läuft") + open
            }
            let what = next.name ?? next.action
            return tr("idle; next \(PracticeText.when(t)): \(what)", "nichts läuft; als Nächstes \(PracticeText.when(t)): \(what)") + open
        }
    }

    /// The section playing: `walk 2/3, 04:10 left`.
    static func sectionText(_ s: Status) -> String? {
        guard let section = s.section else { return nil }
        return Texts.sectionLine(kind: section.kind, index: section.index, count: section.count, remaining: section.remaining)
    }

    /// What a script's line changes with (not the clock).
    static func changeKey(_ s: Status) -> String {
        "\(s.source?.rawValue ?? "")|\(s.state.rawValue)|\(s.isPaused)|\(s.section?.index ?? -1)"
    }

    /// The live line on a terminal.
    static func live(_ s: Status, keys: Bool) -> String {
        let icon = s.isPaused ? "⏸" : "▶"
        var line: String
        if s.state == .starting {
            line = "\(icon) \(tr("starting", "startet"))"
        } else if s.source == .timer {
            let state = TimerState(rawValue: s.state.rawValue) ?? .running
            var parts = ["\(icon) \(state.name())"]
            if state == .preparation {
                parts.append(Texts.text("starts in", [clock(s.remaining)]))
            } else {
                parts.append(Texts.text("elapsed", [clock(s.elapsed)]))
                if s.remaining != nil { parts.append(Texts.text("left", [clock(s.remaining)])) }
                if let section = sectionText(s) { parts.append(section) }
                if let next = s.nextGong { parts.append(Texts.text("next gong", [clock(next)])) }
            }
            line = parts.joined(separator: "   ")
            if keys { line += "   " + Texts.text("attached keys", []) }
        } else {
            let name = s.meditation?.name ?? ""
            let total = Double(s.duration ?? 0)
            let pos = Double(s.position ?? 0)
            let width = 30
            let filled = total > 0 ? min(width, max(0, Int(Double(width) * pos / total))) : 0
            if let startsIn = s.startsIn {
                // The preparation and the start gong: the phase and a countdown to the voice.
                let phase = s.state == .startGong ? TimerState.startGong.name() : TimerState.preparation.name()
                line = "\(icon) \(name)  \(phase)  \(Texts.text("starts in", [clock(startsIn)]))"
            } else {
                line = "\(icon) \(name)  [\(String(repeating: "=", count: filled))\(String(repeating: " ", count: width - filled))] \(clock(s.position)) / \(clock(s.duration))"
            }
            if keys { line += "   " + Texts.text("guided keys", []) }
        }
        return line
    }

    private static func clock(_ v: Int64?) -> String { TimeText.clock(v ?? 0) }
}
