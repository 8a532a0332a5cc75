/// A bell only (a scheduled mindfulness bell): a sound struck `strikes` times, 4 s apart,
/// at a volume, ending when the last strike has rung out. Not practice: not logged. A ring
/// in several rooms starts at an instant (`heardAt`), the device's delay subtracted.
import StillMomentAudio

public final class BellSession: Session {
    public let engine: AudioEngine
    public let sound: Sound
    public let total: Int64
    /// When its first frame is to be heard (MonotonicClock ns; nil: as soon as it can).
    public let heardAt: UInt64?

    public init(sound: Sound, strikes: Int, volume: Double, catalog: SoundCatalog, output: SessionOutput,
                sampleRate: Int = 44100, heardAt: UInt64? = nil) throws(CoreError) {
        guard (1...9).contains(strikes) else { throw CoreError.badValue(option: "--strikes", reason: both("\(strikes) is not from 1 to 9", "\(strikes) liegt nicht zwischen 1 und 9")) }
        guard volume >= 0, volume <= 1 else { throw CoreError.badValue(option: "--volume", reason: both("\(volume) is not from 0 to 1", "\(volume) liegt nicht zwischen 0 und 1")) }
        guard let path = catalog.path(of: sound) else { throw CoreError.damaged(both("the sound \(sound.id) has no file", "der Klang \(sound.id) hat keine Datei")) }
        self.sound = sound
        self.heardAt = heardAt
        let engine = try output.makeEngine(sampleRate: sampleRate)
        self.engine = engine
        let rate = engine.sampleRate
        let bell: CountedSound
        do { bell = try CountedSound(path: path, engineRate: rate, knownFrames: sound.frames) } catch { throw CoreError.audio(error) }
        let frames = bell.frames
        let offsets = GongSchedule.strikeOffsets(strikes: strikes).map { $0 * Int64(rate) / 1000 }
        for (k, start) in offsets.enumerated() {
            let id = k + 1
            engine.schedule(ScoreEntry(id: id, start: start, end: start + frames) { () throws(AudioError) -> Voice in
                Voice(id: id, source: try bell.source(engineRate: rate), start: start, gain: Float(volume))
            })
        }
        total = (offsets.last ?? 0) + frames
    }

    public var kind: SessionKind { .bell }
    public var summary: String { "bell \(sound.id)" }
    public func start() throws(CoreError) {
        do { try engine.start(end: total, heardAt: heardAt) } catch { throw CoreError.audio(error) }
    }
    public func pause() { engine.pause() }
    public func resume() { engine.resume() }
    public var isPaused: Bool { engine.state == .paused }
    @discardableResult public func seek(by ms: Int64) -> Bool { false }
    public func fadeOut(seconds: Double) { engine.fadeOutAndFinish(over: Int64(seconds * Double(engine.sampleRate))) }
    public var isOver: Bool { [.finished, .stopped, .failed].contains(engine.state) }
    public var playedToEnd: Bool { engine.state == .finished }
    public var errors: [AudioError] { engine.errors }
    public var plannedMilliseconds: Int64 { total * 1000 / Int64(engine.sampleRate) }
    public var heardMilliseconds: Int64 { min(engine.position, total) * 1000 / Int64(engine.sampleRate) }
    public func ended(_ record: SessionRecord) {}
    public func waitUntilOver(timeout seconds: Double) { _ = engine.waitUntilDone(timeout: seconds) }
    public func close() { engine.stop() }
}
