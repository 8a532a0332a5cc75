import FoundationEssentials
import Glibc
import StillMomentAudio

/// A guided meditation on the engine: optional preparation, the start gong if set for
/// this meditation and then 2.0 s of silence, the voice within its trim range at its
/// loudness gain, and the end gong if set. Reads only the store's copy.
public final class GuidedSession: Session {
    public let meditation: Meditation
    public let engine: AudioEngine
    public let store: LibraryStore
    /// Timeline frames where the voice starts and ends.
    public let voiceStart: Int64
    public let voiceEnd: Int64
    /// The file position (ms) that `voiceStart` plays.
    public let fileStart: Int64
    public let total: Int64
    public static let pauseAfterGong: Int64 = 2_000
    public let kind: SessionKind
    /// Where the preparation ends (the first frame that counts as heard).
    public let preparationEnd: Int64

    public init(meditation m: Meditation, store: LibraryStore, catalog: SoundCatalog, output: SessionOutput,
                preparation: Int64 = 0, from: Int64 = 0, window: Int64? = nil, sampleRate: Int = 44100) throws(CoreError) {
        meditation = m
        self.store = store
        let engine = try output.makeEngine(sampleRate: sampleRate)
        self.engine = engine
        let rate = Int64(engine.sampleRate)
        func frames(_ ms: Int64) -> Int64 { ms * rate / 1000 }
        let path = store.path(of: m)
        let trimStart = m.trimStart ?? 0
        let trimEnd = m.trimEnd ?? m.durationMilliseconds
        if from > 0, from >= trimEnd - trimStart {
            throw CoreError.badValue(option: "--from", reason: both("\(TimeText.clock(from)) is past the end of \(m.name) (\(TimeText.clock(trimEnd - trimStart)))", "\(TimeText.clock(from)) liegt hinter dem Ende von \(m.name) (\(TimeText.clock(trimEnd - trimStart)))"))
        }
        let begin = min(max(trimStart, trimStart + from), trimEnd)
        fileStart = begin
        var t = frames(preparation)
        preparationEnd = t
        kind = window == nil ? .guided : .preview
        var id = 0
        func gong(_ gongID: String?) throws(CoreError) -> CountedSound? {
            guard let gongID else { return nil }
            let sound = try catalog.gong(gongID)
            guard let p = catalog.path(of: sound) else { return nil }
            do { return try CountedSound(path: p, engineRate: Int(rate), knownFrames: sound.frames) } catch { throw CoreError.audio(error) }
        }
        func schedule(_ gong: CountedSound, at start: Int64) {
            id += 1
            let voiceID = id
            engine.schedule(ScoreEntry(id: voiceID, start: start, end: start + gong.frames) { () throws(AudioError) -> Voice in
                Voice(id: voiceID, source: try gong.source(engineRate: Int(rate)), start: start)
            })
        }
        if window == nil, from == 0, let g = try gong(m.startGong) {
            schedule(g, at: t)
            t += g.frames + frames(Self.pauseAfterGong)
        }
        let length = frames(window ?? (trimEnd - begin))
        voiceStart = t
        voiceEnd = t + length
        let gain = Float(Glibc.pow(10.0, m.loudnessGain / 20))
        id += 1
        let voiceID = id
        let offset = frames(begin)
        let start = t
        // Its length was counted at the import: an MP3 without a Xing tag is not scanned
        // for it at each open (28 ms for 10 minutes here); and an MP3's frame index taken
        // then: a start or seek far into it does not read every frame before (SeekIndex).
        let known = m.durationFrames
        let index = store.seekIndex(for: m)
        do {
            // Open now: a damaged or missing copy is an error before anything plays.
            _ = try DecodedSource(path: path, engineRate: Int(rate), knownFrames: known, knownIndex: index)
        } catch {
            throw CoreError.audio(error)
        }
        engine.schedule(ScoreEntry(id: voiceID, start: start, end: start + length) { () throws(AudioError) -> Voice in
            let source = try TrimmedSource(try DecodedSource(path: path, engineRate: Int(rate), knownFrames: known,
                                                             knownIndex: index),
                                           offset: offset, length: length)
            return Voice(id: voiceID, source: source, start: start, gain: gain)
        })
        t += length
        if window == nil, let g = try gong(m.endGong) {
            schedule(g, at: t)
            t += g.frames
        }
        total = t
    }

    public func start() throws(CoreError) {
        do { try engine.start(end: total) } catch { throw CoreError.audio(error) }
    }

    public var position: Int64 { engine.position }
    public var isPaused: Bool { engine.state == .paused }
    public func pause() { engine.pause() }
    public func resume() { engine.resume() }

    /// Seeks by `ms` within the voice.
    @discardableResult
    public func seek(by ms: Int64) -> Bool {
        let limit = Int64(Int32.max)          // ms: 24 days, past any meditation
        let target = position + max(-limit, min(ms, limit)) * Int64(engine.sampleRate) / 1000
        engine.seek(to: max(voiceStart, min(target, voiceEnd)))
        return true
    }

    /// Seeks to a position in the meditation's file (ms).
    public func seek(toFile ms: Int64) {
        let offset = min(max(0, ms - fileStart), Int64(Int32.max))
        engine.seek(to: min(voiceStart + offset * Int64(engine.sampleRate) / 1000, voiceEnd))
    }

    /// The position in the meditation's file (ms) heard now.
    public var filePosition: Int64 { filePosition(of: position) }

    /// The position in the meditation's file (ms) heard at `ns` (MonotonicClock), a moment
    /// ago while it played on (AudioEngine.position(heardAt:)).
    public func filePosition(heardAt ns: UInt64) -> Int64 { filePosition(of: engine.position(heardAt: ns)) }

    private func filePosition(of position: Int64) -> Int64 {
        let p = min(max(position, voiceStart), voiceEnd)
        return fileStart + (p - voiceStart) * 1000 / Int64(engine.sampleRate)
    }

    /// Saves where playback is (nil once the meditation was heard to the end).
    public func savePosition() throws(CoreError) {
        let done = position >= voiceEnd
        try store.savePosition(id: meditation.id, ms: done ? nil : filePosition)
    }

    // MARK: Session

    /// A preview keeps no place; a guided meditation keeps where it is heard.
    public var keptPosition: Int64? { kind == .preview ? nil : filePosition }
    public func keepPosition() throws(CoreError) { if kind != .preview { try savePosition() } }

    public var summary: String { meditation.name }
    public var meditationID: String? { meditation.id }
    public var teacher: String? { meditation.teacher.isEmpty ? nil : meditation.teacher }
    public func fadeOut(seconds: Double) { engine.fadeOutAndFinish(over: Int64(seconds * Double(engine.sampleRate))) }
    public var isOver: Bool { [.finished, .stopped, .failed].contains(engine.state) }
    public var playedToEnd: Bool { engine.state == .finished && position >= total }
    public var errors: [AudioError] { engine.errors }
    public var plannedMilliseconds: Int64 { (total - preparationEnd) * 1000 / Int64(engine.sampleRate) }
    public var heardMilliseconds: Int64 {
        max(0, min(position, total) - preparationEnd) * 1000 / Int64(engine.sampleRate)
    }
    public func waitUntilOver(timeout seconds: Double) { _ = engine.waitUntilDone(timeout: seconds) }
    public func close() { engine.stop() }

    /// A guided meditation (not its preview) keeps its place for `play --resume`.
    public func ended(_ record: SessionRecord) {
        guard kind == .guided, !record.rendered else { return }
        try? savePosition()
    }
}
