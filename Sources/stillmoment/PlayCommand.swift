import ArgumentParser
import Glibc
import StillMomentAudio
import StillMomentControl
import StillMomentCore

struct PlayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play",
        abstract: "Play a guided meditation from the library.",
        discussion: "On a terminal: space pauses or resumes, left/right seek 15 s, q stops. The position is saved when playback stops."
    )

    @Argument(help: "A UUID, a unique prefix of one, or the exact name.", completion: Complete.meditations) var id: String
    @Option(help: "A countdown before it starts: 15s, or off.") var preparation: String?
    @Option(help: "Start here, e.g. 3:20.") var from: String?
    @Flag(help: "Start where playback last stopped.") var resume = false
    @Option(help: "ALSA device (see `aplay -L`), or pulse / pulse:SINK for PulseAudio, alsa:NAME to force ALSA.") var device: String?
    @Option(help: "Render to this WAV file instead of playing.") var output: String?
    @Option(help: "With --output: s16 (16-bit PCM, dithered) or f32 (32-bit float, the default).", completion: .list(["s16", "f32"])) var format: String?
    @Flag(help: "Start it in the daemon and return at once.") var detach = false
    @Flag(help: "Play in this process, without the daemon (for scripts).") var foreground = false

    /// The meditation for the daemon (nil for --output or --foreground, which play in this process).
    func invocation() throws -> Invocation? {
        try refuseConflicts(output: output, detach: detach, foreground: foreground)
        do { _ = try wavFormat(format, output: output) } catch { throw Console.fail(error) }
        if from != nil && resume {
            throw Console.fail(tr("--from and --resume exclude each other", "--from und --resume schließen einander aus"), code: Exit.usage)
        }
        if output != nil || foreground { return nil }
        do {
            return try Self.daemonSession(id: id, preparation: preparation, from: from, resume: resume, device: device, detach: detach)
        } catch {
            throw Console.fail(error)
        }
    }

    static func daemonSession(id: String, preparation: String?, from: String?, resume: Bool, device: String?,
                              detach: Bool) throws(CoreError) -> Invocation {
        var request = PlayRequest(id: id, resume: resume)
        if let from { request.from = try parse(from, "--from") }
        if let preparation, preparation.lowercased() != "off" { request.preparation = try parse(preparation, "--preparation") }
        if let device { request.device = try DeviceName.parse(device, option: "--device") }
        return .session(.play(request), detach: detach, what: tr("playing \(id)", "Wiedergabe von \(id)"))
    }

    func run() throws {
        if let session = try invocation() {
            try session.run()
            return
        }
        // A render is not listening: the saved position stays as it was.
        try playGuided(makeSession, rendering: output)
    }

    func makeSession(_ store: LibraryStore) throws(CoreError) -> GuidedSession {
        let m = try store.find(id)
        var start: Int64 = 0
        if let from { start = try Self.parse(from, "--from") }
        if resume, let last = m.lastPosition { start = last - (m.trimStart ?? 0) }
        let prep = preparation.map { $0.lowercased() == "off" ? "0s" : $0 } ?? "0s"
        return try GuidedSession(meditation: m, store: store, catalog: try SoundCatalog.withCustomSounds(store: store),
                                 output: try sessionOutput(file: output, device: device, format: format),
                                 preparation: try Self.parse(prep, "--preparation"), from: start)
    }

    static func parse(_ text: String, _ option: String) throws(CoreError) -> Int64 {
        do { return try TimeText.parse(text) } catch { throw CoreError.badValue(option: option, reason: .rendering { error.description }) }
    }
}

struct PreviewCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "preview", abstract: "Play 10 s from the middle of a meditation.")
    @Argument(help: "A UUID, a unique prefix of one, or the exact name.", completion: Complete.meditations) var id: String
    @Option(help: "ALSA device (see `aplay -L`), or pulse / pulse:SINK for PulseAudio, alsa:NAME to force ALSA.") var device: String?
    @Option(help: "Render to this WAV file instead of playing.") var output: String?
    @Option(help: "With --output: s16 (16-bit PCM, dithered) or f32 (32-bit float, the default).", completion: .list(["s16", "f32"])) var format: String?
    @Flag(help: "Start it in the daemon and return at once.") var detach = false
    @Flag(help: "Play in this process, without the daemon (for scripts).") var foreground = false

    func run() throws {
        do { _ = try wavFormat(format, output: output) } catch { throw Console.fail(error) }
        if output != nil || foreground {
            try playGuided(makeSession, rendering: output)
            return
        }
        let request = PlayRequest(id: id, preview: true, device: try device.map { d throws(CoreError) in try DeviceName.parse(d, option: "--device") })
        try submit(.play(request), detach: detach, what: tr("a preview of \(id)", "eine Vorschau von \(id)"))
    }

    func makeSession(_ store: LibraryStore) throws(CoreError) -> GuidedSession {
        let m = try store.find(id)
        let trimStart = m.trimStart ?? 0, trimEnd = m.trimEnd ?? m.durationMilliseconds
        let window = min(10_000, trimEnd - trimStart)
        let middle = (trimEnd - trimStart) / 2 - window / 2
        return try GuidedSession(meditation: m, store: store, catalog: try SoundCatalog.withCustomSounds(store: store),
                                 output: try sessionOutput(file: output, device: device, format: format), from: middle, window: window)
    }
}

/// A file to render to (in `format`: s16 or f32), else the device given, else the one in the settings.
func sessionOutput(file: String?, device: String?, format: String? = nil) throws(CoreError) -> SessionOutput {
    let sampleFormat = try wavFormat(format, output: file)
    if let file { return .file(path: file, format: sampleFormat) }
    if let device { return .device(DeviceConfiguration(name: try DeviceName.parse(device, option: "--device"))) }
    return .device(DeviceConfiguration(name: try DeviceName.setting(try Settings.load())))
}

/// Opens the store, makes the session (a device that cannot open exits 3, any other bad
/// input 2) and plays it with a progress bar (terminal) or quietly (script).
func playGuided(_ make: (LibraryStore) throws(CoreError) -> GuidedSession, rendering: String?) throws {
    StartCodeRelease.step(playing: rendering == nil)   // the arguments parsed
    let store = try openStore()
    StartCodeRelease.step(playing: rendering == nil)   // the store open
    let session: GuidedSession
    do {
        session = try make(store)
    } catch {
        throw Console.fail(error)
    }
    StartCodeRelease.step(playing: rendering == nil)   // the session made
    let signals = StopFlag.interactive()
    let interactive = Console.isTerminal && rendering == nil
    let view = TerminalView(interactive: interactive)
    defer { view.restore() }
    let runner: SessionRunner
    do { runner = try SessionRunner(session, rendered: rendering != nil, log: PracticeLog(store: store)) } catch { throw Console.fail(error) }
    defer { runner.finish() }
    let m = session.meditation
    let total = m.trimEnd ?? m.durationMilliseconds
    if !interactive && rendering == nil { Console.out(tr("playing \(describe(m))", "Wiedergabe: \(describe(m))")) }
    func bar() -> String {
        let pos = session.filePosition
        let width = 30
        let filled = total > 0 ? Int(Double(width) * Double(pos) / Double(total)) : 0
        let state = session.isPaused ? "⏸" : "▶"
        return "\(state) \(m.name)  [\(String(repeating: "=", count: min(width, filled)))\(String(repeating: " ", count: max(0, width - filled)))] \(TimeText.clock(pos)) / \(TimeText.clock(total))   " + Texts.text("play keys", [])
    }
    var stopped = false
    var release = SteadyCodeRelease()
    while true {
        let s = session.engine.state
        // The place kept every few seconds while it plays: a crash or a kill loses only that much.
        runner.keepUpIfDue()
        if rendering == nil { release.tick() }
        if s == .finished || s == .stopped || s == .failed { break }
        if signals.received != nil {
            stopped = true
            break
        }
        if interactive { view.show(bar()) }
        switch view.key(timeoutMs: interactive ? 100 : 200) {
        case .space: if session.isPaused { session.resume() } else { session.pause() }
        case .left: session.seek(by: -15_000)
        case .right: session.seek(by: 15_000)
        case .quit: stopped = true
        case .detach, .finish, nil: break
        }
        if stopped { break }
    }
    if interactive { view.finishLine(bar()) }
    if stopped {
        runner.markEnding(.stopped)
        session.stop(fade: rendering == nil ? 1.0 : 0)
    }
    let errors = session.engine.errors
    // Ends through the runner: the position is saved there (not for a render or a preview).
    runner.finish()
    if !errors.isEmpty {
        for e in errors { Console.error(e.text()) }
        throw ExitCode(Exit.failure)
    }
    if !interactive {
        let at = TimeText.clock(session.filePosition)
        Console.out(stopped ? tr("stopped at \(at)", "abgebrochen bei \(at)")
                            : rendering.map { tr("wrote \($0)", "\($0) geschrieben") } ?? TimerState.completed.name())
    }
}

/// `--format`: s16 (16-bit PCM, dithered: what most players and editors take, half the
/// size) or f32 (32-bit float: the mix exactly as it is); f32 when not given. Refused
/// without `--output`.
func wavFormat(_ text: String?, output: String?) throws(CoreError) -> WAVWriter.SampleFormat {
    if text != nil && output == nil {
        throw CoreError.badRequest(both("--format goes with --output (the WAV file's samples)", "--format gehört zu --output (die Samples der WAV-Datei)"))
    }
    switch text?.lowercased() {
    case nil, "f32", "float", "float32": return .float32
    case "s16", "16", "int16": return .int16
    case let other?:
        throw CoreError.badValue(option: "--format", reason: both("'\(Display.clean(String(other.prefix(20))))' is not s16 or f32",
                                                                "'\(Display.clean(String(other.prefix(20))))' ist weder s16 noch f32"))
    }
}
