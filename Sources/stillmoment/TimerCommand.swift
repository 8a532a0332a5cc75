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

    @Argument(help: "How long to sit: 20m, 90s, 1h15m, or minutes; `open` counts up with no end (until `stillmoment finish`).")
    var duration: String?

    @OptionGroup var options: TimerOptions

    @Option(help: "Start from a saved preset; options given here override it (see `stillmoment preset list`).", completion: Complete.presets)
    var preset: String?

    @Flag(help: "Print the whole plan (each gong's time, sound, volume and reason) without playing.")
    var plan = false

    @Flag(help: "With --plan: print JSON.")
    var json = false

    @Option(help: "Render the whole session to this WAV file, as fast as the CPU goes, instead of playing.", completion: .file(extensions: ["wav"]))
    var output: String?

    @Option(help: "With --output: s16 (16-bit PCM, dithered) or f32 (32-bit float, the default).", completion: .list(["s16", "f32"]))
    var format: String?

    @Option(name: .customLong("fallback-output"), help: .hidden)
    var fallbackOutput: String?

    @Flag(help: "Start the session in the daemon and return at once.")
    var detach = false

    @Flag(help: "Play in this process, without the daemon (for scripts).")
    var foreground = false

    @Option(help: "A sit in several rooms: hall,garden or all (every node in them plays it in step, through the MQTT broker; see `stillmoment rooms`).")
    var rooms: String?

    /// The options as text, with DURATION (or `open`) folded in.
    func optionText() throws -> [String: String] {
        do { return try Self.optionText(duration: duration, options: options.text) } catch { throw Console.fail(error) }
    }

    static func optionText(duration: String?, options: [String: String]) throws(CoreError) -> [String: String] {
        var text = options
        if let duration {
            if duration.trimmingWhitespace().lowercased() == "open" {
                text[TimerOption.open.rawValue] = "yes"
            } else {
                if text[TimerOption.duration.rawValue] != nil {
                    throw CoreError.badRequest(both("give the duration once: DURATION or --duration",
                                                  "gib die Dauer nur einmal an: DURATION oder --duration"))
                }
                text[TimerOption.duration.rawValue] = duration
            }
        }
        return text
    }

    /// The configuration this sit runs (settings, preset, options), and its catalog.
    func resolve(_ text: [String: String]) throws -> (TimerConfiguration, SoundCatalog, Preset?) {
        let store = try openStore()
        do {
            let catalog = try SoundCatalog.withCustomSounds(store: store)
            let chosen = try preset.map { (name) throws(CoreError) in try PresetStore(store: store).require(name) }
            let configuration = try TimerConfiguration(settings: try Settings.load(), preset: chosen,
                                                       options: try TimerRequest(text: text), catalog: catalog)
            return (configuration, catalog, chosen)
        } catch {
            throw Console.fail(error)
        }
    }

    /// A session for the daemon: DURATION, the options as text, a preset, --detach (nil for
    /// --plan, --output or --foreground, which run in this process).
    func invocation() throws -> Invocation? {
        guard rooms == nil else { return nil }
        guard !plan, !json, output == nil, format == nil, fallbackOutput == nil, !foreground else { return nil }
        return Self.daemonSession(duration: duration, options: try optionText(), preset: preset, detach: detach)
    }

    static func daemonSession(duration: String?, options: [String: String], preset: String?, detach: Bool) -> Invocation {
        let what = duration?.lowercased() == "open" ? tr("an open sit", "eine offene Sitzung")
            : duration.map { tr("a timer of \($0)", "ein Timer von \($0)") } ?? tr("a timer", "ein Timer")
        return .session(.timer(TimerStartRequest(preset: preset, options: options)), detach: detach, what: what)
    }

    func run() throws {
        if let session = try invocation() {
            try session.run()
            return
        }
        if let rooms {
            try startInRooms(rooms)
            return
        }
        let options = try optionText()
        if plan {
            if output != nil || detach || foreground { throw Console.fail(CoreError.badRequest(both("--plan only prints the plan; it plays nothing", "--plan zeigt nur den Plan; es spielt nichts"))) }
            let (configuration, catalog, _) = try resolve(options)
            let p: TimerPlan
            do { p = try TimerSession.plan(for: configuration, catalog: catalog) } catch { throw Console.fail(error) }
            PlanText.print(p, configuration: configuration, json: json)
            return
        }
        if json { throw Console.fail(CoreError.badRequest(both("--json goes with --plan", "--json gehört zu --plan"))) }
        try refuseConflicts(output: output, detach: detach, foreground: foreground)
        let wav: WAVWriter.SampleFormat
        do { wav = try wavFormat(format, output: output) } catch { throw Console.fail(error) }
        StartCodeRelease.step(playing: output == nil)   // the arguments parsed
        let (configuration, catalog, chosen) = try resolve(options)
        StartCodeRelease.step(playing: output == nil)   // the options and the catalog read

        var target: SessionOutput = output.map { .file(path: $0, format: wav) } ?? .device(DeviceConfiguration(name: configuration.device))
        let session: TimerSession
        do {
            session = try TimerSession(configuration: configuration, catalog: catalog, output: target)
        } catch {
            guard case .device(let device) = error, let fallback = fallbackOutput else { throw Console.fail(error) }
            Console.err(tr("no sound device to play on (\(device.message)): rendering the session to \(fallback) instead",
                           "kein Tonausgabegerät zum Abspielen (\(device.message)): die Sitzung wird stattdessen in \(fallback) geschrieben"))
            target = .file(path: fallback)
            do {
                session = try TimerSession(configuration: configuration, catalog: catalog, output: target)
            } catch {
                throw Console.fail(error)
            }
        }
        let renderPath: String? = if case .file(let p, _) = target { p } else { nil }
        StartCodeRelease.step(playing: renderPath == nil)   // the session made
        let result = TimerRunner(session: session, renderingTo: renderPath, announce: output != nil, preset: chosen?.name).run()
        if result == .failed { throw ExitCode(Exit.failure) }
    }
}

extension TimerCommand {
    /// `timer … --rooms hall,garden`: the daemon sends the sit to every node (it plays here
    /// too when this node's room is one of them); it returns at once, as --detach does.
    func startInRooms(_ text: String) throws {
        if plan || json || output != nil || format != nil || foreground {
            throw Console.fail(tr("--rooms starts the sit in the daemons of those rooms: it goes without --plan, --output and --foreground",
                                  "--rooms startet die Sitzung in den Daemons dieser Räume: es geht nicht mit --plan, --output und --foreground"))
        }
        let choice: RoomChoice
        do { choice = try RoomChoice(parsing: text) } catch { throw Console.fail(error) }
        let status = try control(.timer(TimerStartRequest(preset: preset, options: try optionText(), rooms: choice)), start: true)
        guard let sent = status.rang else { return }
        Console.out(tr("a sit in \(sent.rooms) from \(RingCommand.instantText(sent.at)) (stillmoment pause, resume and stop reach every room)",
                       "eine Sitzung in \(sent.rooms) ab \(RingCommand.instantText(sent.at)) (stillmoment pause, resume und stop erreichen alle Räume)"))
    }
}

/// Drives a session from the terminal (or from a script without one).
struct TimerRunner {
    enum Result { case completed, stopped, failed }
    let session: TimerSession
    let renderingTo: String?
    /// Say where the session is rendered (not after the fallback notice, which said it).
    var announce = true
    /// The preset it came from (for the practice log).
    var preset: String?
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
            runner = try SessionRunner(session, rendered: renderingTo != nil, log: log, preset: preset)
        } catch {
            view.restore()
            Console.error(Console.text(error))
            return .failed
        }
        // However it ends, it ends through the runner (the device released, the record made).
        defer { runner.finish() }
        if let path = renderingTo, announce {
            Console.out(text("rendering", path))
        }
        var lastState: TimerState?
        var lastPaused = false
        var release = SteadyCodeRelease()
        while true {
            runner.keepUpIfDue()
            if renderingTo == nil { release.tick() }
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
            case .finish:
                if !session.wasFinished {
                    if session.isPaused { session.resume() }
                    runner.markEnding(.finished)
                    session.finish()
                }
            default:
                break
            }
        }
        let errors = session.engine.errors
        let final = session.engine.state
        runner.finish()
        if !errors.isEmpty || final == .failed {
            if interactive { view.finishLine(line(stopping: false)) }
            for e in errors { Console.error(e.text(language)) }
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

    /// The live line, from what the session says of itself (times rounded up for a countdown).
    private func line(stopping: Bool) -> String {
        let snap = session.snapshot
        let state = TimerState(rawValue: snap.phase.rawValue) ?? .running
        var parts: [String] = []
        if stopping {
            parts.append("■ " + TimerState.stopped.name(language))
        } else if snap.paused {
            parts.append("⏸ " + text("paused") + " (" + state.name(language) + ")")
        } else {
            parts.append("▶ " + state.name(language))
        }
        if state == .preparation {
            parts.append(text("starts in", TimeText.clock((snap.remaining ?? 0) + 999)))
        } else {
            parts.append(text("elapsed", TimeText.clock(snap.elapsed ?? 0)))
            if let left = snap.remaining {
                parts.append(text("left", TimeText.clock(left + ([.running, .startGong].contains(state) ? 999 : 0))))
            }
            if let section = snap.section {
                parts.append(Texts.sectionLine(kind: section.kind, index: section.index, count: section.count, remaining: section.remaining + 999))
            }
            if let next = snap.nextGong { parts.append(text("next gong", TimeText.clock(next))) }
        }
        if !stopping { parts.append(text("keys")) }
        return parts.joined(separator: "   ")
    }

    private func plainLine(state: TimerState, paused: Bool) -> String {
        let snap = session.snapshot
        let name = paused ? text("paused") + " (" + state.name(language) + ")" : state.name(language)
        var line = "\(name)  \(text("elapsed", TimeText.clock(snap.elapsed ?? 0)))"
        if let left = snap.remaining { line += "  " + text("left", TimeText.clock(left)) }
        if let section = snap.section {
            line += "  " + Texts.sectionLine(kind: section.kind, index: section.index, count: section.count, remaining: section.remaining)
        }
        return line
    }

    private func text(_ key: String, _ args: String...) -> String { Texts.text(key, args, language) }
}

/// The live views' words, in English and German (from LANG).
enum Texts {
    /// `walk 2/3, 04:10 left` (`Gehen 2/3, noch 04:10`).
    static func sectionLine(kind: Section.Kind, index: Int, count: Int, remaining: Int64, _ language: Language = .current) -> String {
        let name = language == .de ? (kind == .walk ? "Gehen" : "Sitzen") : kind.rawValue
        return language == .de ? "\(name) \(index + 1)/\(count), noch \(TimeText.clock(remaining))"
                               : "\(name) \(index + 1)/\(count), \(TimeText.clock(remaining)) left"
    }

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
        case ("keys", .en): return "[space] pause  [f] finish  [q] stop"
        case ("keys", .de): return "[Leertaste] Pause  [f] abschließen  [q] Ende"
        case ("attached keys", .en): return "[space] pause  [f] finish  [q] stop  [d] detach"
        case ("attached keys", .de): return "[Leertaste] Pause  [f] abschließen  [q] Ende  [d] lösen"
        case ("guided keys", .en): return "[space] pause  [←/→] 15 s  [q] stop  [d] detach"
        case ("guided keys", .de): return "[Leertaste] Pause  [←/→] 15 s  [q] Ende  [d] lösen"
        case ("play keys", .en): return "[space] pause  [←/→] 15 s  [q] stop"
        case ("play keys", .de): return "[Leertaste] Pause  [←/→] 15 s  [q] Ende"
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

/// `--output`, `--detach` and `--foreground`: where a session plays; at most one of them.
func refuseConflicts(output: String?, detach: Bool, foreground: Bool) throws {
    if output != nil && (detach || foreground) {
        let flag = detach ? "detach" : "foreground"
        throw Console.fail(tr("--output renders to a file in this process; it cannot be combined with --\(flag)",
                              "--output schreibt die Sitzung in diesem Prozess in eine Datei; das geht nicht zusammen mit --\(flag)"),
                           code: Exit.usage)
    }
    if detach && foreground {
        throw Console.fail(tr("--detach and --foreground exclude each other", "--detach und --foreground schließen einander aus"),
                           code: Exit.usage)
    }
}
