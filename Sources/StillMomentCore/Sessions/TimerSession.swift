import StillMomentAudio
import Synchronization

/// Where a session's sound goes.
public enum SessionOutput: Sendable {
    case device(DeviceConfiguration)
    /// A WAV file: 32-bit float (the mix as it is) or 16-bit PCM with TPDF dither.
    case file(path: String, format: WAVWriter.SampleFormat = .float32)

    /// Opens the engine on this output.
    func makeEngine(sampleRate: Int) throws(CoreError) -> AudioEngine {
        do {
            switch self {
            case .device(let device): return try AudioEngine(sampleRate: sampleRate, sink: .device(device))
            case .file(let path, let format): return try AudioEngine(sampleRate: sampleRate, sink: .file(path: path, format: format))
            }
        } catch {
            if case .device(let device) = error { throw CoreError.device(device) }
            throw CoreError.audio(error)
        }
    }
}

/// A timer session on the engine: the plan put on the score, and its controls.
public final class TimerSession: Session {
    public let plan: TimerPlan
    public let configuration: TimerConfiguration
    public let engine: AudioEngine
    /// The end gong's file and length, for `finish`.
    private let endGong: CountedSound
    /// The frame a `finish` took effect at (-1: not finished early).
    private let finishedAt = FrameMarker()

    /// For a sit in several rooms: the instant (CLOCK_MONOTONIC ns) its timeline's frame at
    /// `from` ms is heard (nil: at once, from its start).
    public let heardAt: UInt64?
    public let from: Int64

    /// Opens the output and the sounds and schedules the whole session. Errors here
    /// (a device that cannot open, a damaged sound) come before anything plays.
    public init(configuration: TimerConfiguration, catalog: SoundCatalog, output: SessionOutput,
                sampleRate: Int = 44100, heardAt: UInt64? = nil, from: Int64 = 0) throws(CoreError) {
        self.configuration = configuration
        self.heardAt = heardAt
        self.from = max(0, from)
        let engine = try output.makeEngine(sampleRate: sampleRate)
        self.engine = engine
        let rate = engine.sampleRate
        // Open each sound once now: a missing or damaged file is an error before we start,
        // and the gong's exact length places the ambience and the end of the session.
        func length(_ sound: Sound, loop: Bool = false) throws(CoreError) -> CountedSound {
            guard let path = catalog.path(of: sound) else { throw CoreError.damaged(both("the sound \(sound.id) has no file", "der Klang \(sound.id) hat keine Datei")) }
            do { return try CountedSound(path: path, engineRate: rate, loop: loop, knownFrames: sound.frames) } catch {
                throw CoreError.audio(error)
            }
        }
        let gong = try length(configuration.gong)
        endGong = gong
        let interval = configuration.intervalTimes.isEmpty && configuration.randomBellTimes.isEmpty
            ? nil : try length(configuration.intervalGong)
        let section = configuration.sections == nil ? nil : try length(configuration.sectionGong)
        let ambience = try configuration.ambience.map { (s) throws(CoreError) in try length(s, loop: true) }
        plan = TimerPlan(configuration: configuration, rate: rate, gongFrames: gong.frames,
                         hasAmbience: ambience != nil)

        var id = 0
        func gongEntry(_ sound: CountedSound, at start: Int64, volume: Double) -> ScoreEntry {
            id += 1
            let voiceID = id
            return ScoreEntry(id: voiceID, start: start, end: start + sound.frames) { () throws(AudioError) -> Voice in
                Voice(id: voiceID, source: try sound.source(engineRate: rate), start: start, gain: Float(volume))
            }
        }
        for strike in plan.startStrikes {
            engine.schedule(gongEntry(gong, at: strike, volume: configuration.gongVolume))
        }
        if let interval {
            for t in plan.intervalGongs + plan.randomBells {
                engine.schedule(gongEntry(interval, at: t, volume: configuration.intervalVolume))
            }
        }
        if let section {
            for t in plan.sectionStrikes {
                engine.schedule(gongEntry(section, at: t, volume: configuration.gongVolume))
            }
        }
        for strike in plan.endStrikes {
            engine.schedule(gongEntry(gong, at: strike, volume: configuration.gongVolume))
        }
        // Rendered to a file: the ambience's loop is decoded once and played from memory
        // (the same frames; a 30-minute session decoded it sixty times). Not on a device.
        let ambiencePass: LoopPass?
        do {
            if let ambience, case .file = engine.sink {
                ambiencePass = try LoopPass.decode(ambience.source(engineRate: rate, loop: true), maxFrames: Int64(rate) * 120)
            } else {
                ambiencePass = nil
            }
        } catch {
            throw CoreError.audio(error)
        }
        if let ambience {
            for a in plan.ambienceSegments {
                id += 1
                let voiceID = id
                let volume = Float(configuration.ambienceVolume)
                engine.schedule(ScoreEntry(id: voiceID, start: a.start, end: a.fadeOutStart + a.fadeOut) {
                    () throws(AudioError) -> Voice in
                    let source: any FrameSource
                    if let ambiencePass { source = ambiencePass.source() } else { source = try ambience.source(engineRate: rate, loop: true) }
                    let voice = Voice(id: voiceID, source: source, start: a.start, gain: volume, fadeIn: a.fadeIn)
                    voice.fadeOut(at: a.fadeOutStart, over: a.fadeOut)
                    return voice
                })
            }
        }
    }

    /// The plan of a session without playing it (`timer --plan`): the same frames the
    /// session plays at `sampleRate`.
    public static func plan(for configuration: TimerConfiguration, catalog: SoundCatalog,
                            sampleRate: Int = 44100) throws(CoreError) -> TimerPlan {
        guard let path = catalog.path(of: configuration.gong) else {
            throw CoreError.damaged(both("the sound \(configuration.gong.id) has no file", "der Klang \(configuration.gong.id) hat keine Datei"))
        }
        let frames: Int64
        do { frames = try CountedSound(path: path, engineRate: sampleRate, knownFrames: configuration.gong.frames).frames } catch {
            throw CoreError.audio(error)
        }
        return TimerPlan(configuration: configuration, rate: sampleRate, gongFrames: frames,
                         hasAmbience: configuration.ambience != nil)
    }

    public func start() throws(CoreError) {
        if from > 0 { engine.seek(to: frame(ms: from)) }     // queued: the first thing rendered
        do { try engine.start(end: plan.total, heardAt: heardAt) } catch { throw CoreError.audio(error) }
    }

    private func frame(ms: Int64) -> Int64 { ms * Int64(engine.sampleRate) / 1000 }

    /// A sit in several rooms goes on: from `position` ms of its timeline (where every node
    /// agreed it stood), its first frame heard at `instant` (CLOCK_MONOTONIC ns).
    public func resume(from position: Int64, heardAt instant: UInt64) {
        engine.seek(to: frame(ms: position))
        engine.resume(heardAt: instant)
    }

    public var position: Int64 { engine.position }

    public var state: TimerState {
        switch engine.state {
        case .idle: return .idle
        case .stopped: return .stopped
        case .finished: return .completed
        default:
            let p = engine.position, f = finishedAt.frame
            return f >= 0 && p >= f ? .endGong : plan.state(at: p)
        }
    }

    public var isPaused: Bool { engine.state == .paused }

    public func pause() { engine.pause() }
    /// A sit in several rooms pauses with its device running (its resume is to the frame).
    public func pauseForRooms() { engine.pauseKeepingDevice() }
    public func resume() { engine.resume() }

    // MARK: Session

    public var kind: SessionKind { .timer }
    public var summary: String {
        if configuration.openEnded { return "open sit" }
        if let sections = configuration.sections { return sections.description }
        return "timer of \(TimeText.compact(configuration.duration))"
    }
    @discardableResult public func seek(by ms: Int64) -> Bool { false }
    /// Fades everything out over `seconds` from what is heard now, then ends.
    public func fadeOut(seconds: Double) { engine.fadeOutAndFinish(over: Int64(seconds * Double(engine.sampleRate))) }
    public var isOver: Bool { [.finished, .stopped, .failed].contains(engine.state) }
    public var playedToEnd: Bool {
        engine.state == .finished && (position >= plan.total || finishedAt.frame >= 0)
    }

    /// Whether `finish` ended it early (as a completed sit).
    public var wasFinished: Bool { finishedAt.frame >= 0 }

    /// Ends the sit now as a completed one (`stillmoment finish`, `f`): from the next
    /// frame rendered, the end gong's strikes on their exact frames and its ring-out,
    /// while the ambience and anything ringing fade out over 3 s. Returns at once.
    public func finish() {
        let rate = Int64(engine.sampleRate)
        let gong = endGong, volume = Float(configuration.gongVolume)
        let strikes = GongSchedule.strikeOffsets(strikes: configuration.strikes).map { $0 * rate / 1000 }
        let marker = finishedAt
        let frames = gong.frames, engineRate = engine.sampleRate
        engine.finish(FinishPlan(fade: TimerPlan.ambienceFadeOut * rate / 1000) { t in
            marker.set(t)
            return strikes.enumerated().map { k, offset in
                let start = t + offset, voiceID = 1_000_000 + k
                return ScoreEntry(id: voiceID, start: start, end: start + frames) { () throws(AudioError) -> Voice in
                    Voice(id: voiceID, source: try gong.source(engineRate: engineRate), start: start, gain: volume)
                }
            }
        })
    }
    public var errors: [AudioError] { engine.errors }
    /// 0 for an open sit (it had no planned length).
    public var plannedMilliseconds: Int64 { configuration.openEnded ? 0 : configuration.duration }
    /// Meditation time heard: from the start gong, pauses excluded, up to zero.
    public var heardMilliseconds: Int64 {
        let f = finishedAt.frame
        return plan.elapsed(at: f >= 0 ? min(position, f) : position)
    }
    public func waitUntilOver(timeout seconds: Double) { _ = engine.waitUntilDone(timeout: seconds) }
    public func close() { engine.stop() }
    public func ended(_ record: SessionRecord) {}

    /// Waits until the session completes or is stopped.
    public func wait() -> TimerState {
        let s = engine.waitUntilDone()
        return s == .finished ? .completed : .stopped
    }
}

/// A frame set once from the render thread and read anywhere (-1 until then).
final class FrameMarker: Sendable {
    private let value = Atomic<Int64>(-1)
    var frame: Int64 { value.load(ordering: .acquiring) }
    func set(_ frame: Int64) { value.store(frame, ordering: .releasing) }
}
