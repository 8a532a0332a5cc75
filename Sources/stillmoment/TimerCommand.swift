import ArgumentParser
import Glibc
import StillMomentAudio
import StillMomentControl
import StillMomentCore

struct TimerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "timer",
        abstract: "Sit with a timer: preparation, start gong, interval gongs, ambience, end gong.",
        discussion: """
            DURATION is like 20m, 90s, 1h15m or a number of minutes (1 s to 24 h); the default \
            comes from the settings (10m). Every option's default comes from \
            `stillmoment settings`. The session plays in the daemon (started if none runs) and \
            outlives this shell; on a terminal: space pauses or resumes, q stops, d detaches.
            """
    )

    @Argument(help: "How long to sit: 20m, 90s, 1h15m, or minutes.")
    var duration: String?

    @Option(help: "Countdown before the start gong: 10s, or off.")
    var preparation: String?

    @Option(help: "Start and end gong (see `stillmoment sounds`).", completion: Complete.gongs)
    var gong: String?

    @Option(name: .customLong("gong-volume"), help: "Gong volume, 0 to 1.")
    var gongVolume: String?

    @Option(help: "Strike the start and end gong N times, a few seconds apart.")
    var strikes: String?

    @Option(help: "Interval gongs every 5m (or another time), or off.")
    var interval: String?

    @Option(name: .customLong("interval-mode"), help: "repeating, after-start or before-end.", completion: Complete.modes)
    var intervalMode: String?

    @Option(name: .customLong("interval-gong"), help: "The interval gong's sound.", completion: Complete.gongs)
    var intervalGong: String?

    @Option(name: .customLong("interval-volume"), help: "Interval gong volume, 0 to 1.")
    var intervalVolume: String?

    @Option(help: "Interval gongs at given times, e.g. 5m,12m30s,-2m (negative: before the end). Replaces --interval.")
    var bells: String?

    @Option(help: "Background ambience (forest, rain, …) or silent.", completion: Complete.ambiences)
    var ambience: String?

    @Option(name: .customLong("ambience-volume"), help: "Ambience volume, 0 to 1.")
    var ambienceVolume: String?

    @Option(help: "ALSA device (see `aplay -L`), or pulse / pulse:SINK for PulseAudio, alsa:NAME to force ALSA.")
    var device: String?

    @Option(help: "Render the whole session to this WAV file, as fast as the CPU goes, instead of playing.", completion: .file(extensions: ["wav"]))
    var output: String?

    @Option(name: .customLong("fallback-output"), help: .hidden)
    var fallbackOutput: String?

    @Flag(help: "Start the session in the daemon and return at once.")
    var detach = false

    @Flag(help: "Play in this process, without the daemon (for scripts).")
    var foreground = false

    func run() throws {
        var options: [String: String] = [:]
        options["duration"] = duration
        options["preparation"] = preparation
        options["gong"] = gong
        options["gong-volume"] = gongVolume
        options["strikes"] = strikes
        options["interval"] = interval
        options["interval-mode"] = intervalMode
        options["interval-gong"] = intervalGong
        options["interval-volume"] = intervalVolume
        options["bells"] = bells
        options["ambience"] = ambience
        options["ambience-volume"] = ambienceVolume
        options["device"] = device

        if output != nil && (detach || foreground) {
            throw Console.fail("--output renders to a file in this process; it cannot be combined with --\(detach ? "detach" : "foreground")", code: Exit.usage)
        }
        if detach && foreground { throw Console.fail("--detach and --foreground exclude each other", code: Exit.usage) }
        if output == nil && fallbackOutput == nil && !foreground {
            let what = "a timer" + (duration.map { " of \($0)" } ?? "")
            try submit(.timer, ["options": .object(options.mapValues(JSON.string))], detach: detach, what: what)
            return
        }
        let catalog: SoundCatalog
        let configuration: TimerConfiguration
        do {
            catalog = try SoundCatalog.withCustomSounds(store: try LibraryStore())
            configuration = try TimerConfiguration(settings: try Settings.load(), options: options, catalog: catalog)
        } catch {
            throw Console.fail(error)
        }

        var target: SessionOutput = output.map { .file(path: $0) } ?? .device(DeviceConfiguration(name: configuration.device))
        let session: TimerSession
        do {
            session = try TimerSession(configuration: configuration, catalog: catalog, output: target)
        } catch {
            guard case .device(let device) = error else { throw Console.fail(error) }
            guard let fallback = fallbackOutput else { throw Console.fail(error.description, code: Exit.device) }
            Console.err("no sound device to play on (\(device.message)): rendering the session to \(fallback) instead")
            target = .file(path: fallback)
            do {
                session = try TimerSession(configuration: configuration, catalog: catalog, output: target)
            } catch {
                throw Console.fail(error)
            }
        }
        let renderPath: String? = if case .file(let p) = target { p } else { nil }
        let result = TimerRunner(session: session, renderingTo: renderPath, announce: output != nil).run()
        if result == .failed { throw ExitCode(Exit.failure) }
    }
}

/// Drives a session from the terminal (or from a script without one).
struct TimerRunner {
    enum Result { case completed, stopped, failed }
    let session: TimerSession
    let renderingTo: String?
    /// Say where the session is rendered (not after the fallback notice, which said it).
    var announce = true
    let language = Language.current

    func run() -> Result {
        let signals = StopFlag.interactive()
        let interactive = Console.isTerminal && renderingTo == nil
        let view = TerminalView(interactive: interactive)
        defer { view.restore() }
        let runner: SessionRunner
        do {
            // A sit in this process is practice too (a render is not): it goes in the log.
            let log = renderingTo == nil ? (try? LibraryStore()).map(PracticeLog.init) : nil
            runner = try SessionRunner(session, rendered: renderingTo != nil, log: log)
        } catch {
            view.restore()
            Console.err("error: \(error.description)")
            return .failed
        }
        // However it ends, it ends through the runner (the device released, the record made).
        defer { runner.finish() }
        if let path = renderingTo, announce {
            Console.out(text("rendering", path))
        }
        var lastState: TimerState?
        var lastPaused = false
        var lastCheckpoint = SessionClock.milliseconds()
        while true {
            if SessionClock.milliseconds() - lastCheckpoint >= 5_000 {
                runner.checkpoint()
                lastCheckpoint = SessionClock.milliseconds()
            }
            let engineState = session.engine.state
            if engineState == .finished || engineState == .stopped || engineState == .failed { break }
            if let sig = signals.received {
                _ = sig
                if interactive { view.finishLine(line(stopping: true)) }
                runner.markEnding(.stopped)
                session.stop(fade: renderingTo == nil ? 1.0 : 0.0)
                if !interactive && renderingTo == nil { Console.out(TimerState.stopped.name(language)) }
                return .stopped
            }
            let state = session.state
            let paused = session.isPaused
            if interactive {
                view.show(line(stopping: false))
            } else if renderingTo == nil && state != .idle && (state != lastState || paused != lastPaused) {
                Console.out(plainLine(state: state, paused: paused))
            }
            lastState = state
            lastPaused = paused
            switch view.key(timeoutMs: interactive ? 100 : 200) {
            case .space:
                if session.isPaused { session.resume() } else { session.pause() }
            case .quit:
                view.finishLine(line(stopping: true))
                runner.markEnding(.stopped)
                session.stop(fade: 1.0)
                return .stopped
            default:
                break
            }
        }
        let errors = session.engine.errors
        let final = session.engine.state
        runner.finish()
        if !errors.isEmpty || final == .failed {
            if interactive { view.finishLine(line(stopping: false)) }
            for e in errors { Console.err("error: \(e.description)") }
            return .failed
        }
        if interactive {
            view.finishLine("✓ " + TimerState.completed.name(language) + "  " + TimeText.clock(session.plan.elapsed(at: session.plan.total)))
        } else if let path = renderingTo {
            let seconds = Double(session.plan.total) / Double(session.plan.rate)
            Console.out(text("wrote", path, TimeText.clock(Int64(seconds * 1000))))
        } else {
            Console.out(TimerState.completed.name(language))
        }
        return .completed
    }

    private func line(stopping: Bool) -> String {
        let p = session.position
        let plan = session.plan
        let state = plan.state(at: p)
        var parts: [String] = []
        if stopping {
            parts.append("■ " + TimerState.stopped.name(language))
        } else if session.isPaused {
            parts.append("⏸ " + text("paused") + " (" + state.name(language) + ")")
        } else {
            parts.append("▶ " + state.name(language))
        }
        if state == .preparation {
            parts.append(text("starts in", TimeText.clock(plan.remaining(at: p) + 999)))
        } else {
            parts.append(text("elapsed", TimeText.clock(plan.elapsed(at: p))))
            parts.append(text("left", TimeText.clock(plan.remaining(at: p) + (p < plan.meditationEnd ? 999 : 0))))
            if let next = plan.nextGong(after: p), next > plan.meditationStart {
                parts.append(text("next gong", TimeText.clock(plan.milliseconds(next - plan.meditationStart))))
            }
        }
        if !stopping { parts.append(text("keys")) }
        return parts.joined(separator: "   ")
    }

    private func plainLine(state: TimerState, paused: Bool) -> String {
        let p = session.position
        let plan = session.plan
        let name = paused ? text("paused") + " (" + state.name(language) + ")" : state.name(language)
        return "\(name)  \(text("elapsed", TimeText.clock(plan.elapsed(at: p))))  \(text("left", TimeText.clock(plan.remaining(at: p))))"
    }

    private func text(_ key: String, _ args: String...) -> String { Texts.text(key, args, language) }
}

/// The live views' words, in English and German (from LANG).
enum Texts {
    static func text(_ key: String, _ args: [String], _ language: Language = .current) -> String {
        let a = args + ["", "", ""]
        switch (key, language) {
        case ("paused", .en): return "paused"
        case ("paused", .de): return "pausiert"
        case ("starts in", .en): return "starts in \(a[0])"
        case ("starts in", .de): return "Beginn in \(a[0])"
        case ("elapsed", .en): return "elapsed \(a[0])"
        case ("elapsed", .de): return "vergangen \(a[0])"
        case ("left", .en): return "left \(a[0])"
        case ("left", .de): return "übrig \(a[0])"
        case ("next gong", .en): return "next gong at \(a[0])"
        case ("next gong", .de): return "nächster Gong bei \(a[0])"
        case ("keys", .en): return "[space] pause  [q] stop"
        case ("keys", .de): return "[Leertaste] Pause  [q] Ende"
        case ("attached keys", .en): return "[space] pause  [q] stop  [d] detach"
        case ("attached keys", .de): return "[Leertaste] Pause  [q] Ende  [d] lösen"
        case ("guided keys", .en): return "[space] pause  [←/→] 15 s  [q] stop  [d] detach"
        case ("guided keys", .de): return "[Leertaste] Pause  [←/→] 15 s  [q] Ende  [d] lösen"
        case ("detached", .en): return "detached: the session plays on (`stillmoment attach` follows it, `stillmoment stop` ends it)"
        case ("detached", .de): return "gelöst: die Sitzung läuft weiter (`stillmoment attach` zeigt sie, `stillmoment stop` beendet sie)"
        case ("rendering", .en): return "rendering the session to \(a[0])"
        case ("rendering", .de): return "Sitzung wird in \(a[0]) geschrieben"
        case ("wrote", .en): return "wrote \(a[0]) (\(a[1]))"
        case ("wrote", .de): return "\(a[0]) geschrieben (\(a[1]))"
        default: return key
        }
    }
}
