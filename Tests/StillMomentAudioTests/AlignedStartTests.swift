// An aligned start (AudioEngine.start(heardAt:), sm_output_align) on the `file:` device,
// which does not play in real time: the silence in front of the first frame is the time
// from the start to the instant, every frame after it comes once and in order, and a start
// whose instant has passed is played at no volume and says how late it was. (On a device
// that plays in real time the instant is met from its delay, and one reached up to 20 ms
// late leaves out the frames due by then instead: the rooms' process tests measure it on
// PulseAudio, in one capture of several nodes.)
import Foundation
import Testing
@_spi(Testing) import StillMomentAudio

@Suite("An aligned start")
struct AlignedStartTests {
    func run(lead: Int64) throws -> (samples: [Float], missed: Double?, caughtUp: Double?) {
        let dir = TempDir()
        let path = dir.file("aligned.wav")
        let engine = try AudioEngine(sampleRate: 44100, sink: .device(DeviceConfiguration(name: "file:FILE=\(path),FORMAT=wav",
                                                                                         ringFrames: 8192)))
        engine.add(Voice(id: 1, source: CountingSource(), start: 0))
        let now = MonotonicClock.nanoseconds()
        let at = lead >= 0 ? now + UInt64(lead) * 1_000_000 : now - UInt64(-lead) * 1_000_000
        try engine.start(end: 44100, heardAt: at)
        _ = engine.waitUntilDone(timeout: 10)
        let missed = engine.missedStart, caughtUp = engine.caughtUpStart
        engine.stop()
        return (try WAV.read(path, dataIsFloat: true).samples, missed, caughtUp)
    }

    @Test("200 ms ahead: 200 ms of silence (less what the start took), then every frame once, in order")
    func ahead() throws {
        let (samples, missed, caughtUp) = try run(lead: 200)
        #expect(missed == nil && caughtUp == nil)
        let first = try #require(stride(from: 1, to: samples.count, by: 2).first { samples[$0] != 0 }) / 2
        // Reckoned at the output's first look, a few ms after the call at most.
        #expect(first > 44100 * 150 / 1000 && first <= 44100 * 200 / 1000, "\(first) frames of silence")
        #expect(samples.count / 2 - first == 44100)
        for i in 0..<44100 where samples[2 * (first + i)] != Float(Int64(i) % CountingSource.period) * CountingSource.scale {
            Issue.record("frame \(i) after the silence is not the source's")
            break
        }
    }

    @Test("a pause that keeps the device, a seek, and a resume heard at an instant: silence up to it, then the timeline from that point, faded in")
    func resumeAligned() throws {
        let dir = TempDir()
        let path = dir.file("resumed.wav")
        let engine = try AudioEngine(sampleRate: 44100, sink: .device(DeviceConfiguration(name: "file:FILE=\(path),FORMAT=wav",
                                                                                         ringFrames: 8192)))
        engine.add(Voice(id: 1, source: CountingSource(), start: 0))
        // 30 s of timeline: the file device renders as fast as it can, and the pause (at
        // once) must come before the end; the resume goes on from 1.5 s before it.
        let end: Int64 = 44100 * 30, from = end - 66150
        try engine.start(end: end)
        engine.pauseKeepingDevice()
        #expect(engine.state == .paused)
        engine.seek(to: from)
        engine.resume(heardAt: MonotonicClock.nanoseconds() + 150_000_000)
        #expect(engine.waitUntilDone(timeout: 10) == .finished)
        engine.stop()
        let samples = try WAV.read(path, dataIsFloat: true).samples
        let frames = samples.count / 2, resumed = Int(end - from)
        try #require(frames > resumed + 4410)
        // The last frames are the timeline from 22050 on (after the fade-in's first ms) ...
        for k in 4096..<resumed {
            let i = frames - resumed + k
            if samples[2 * i] != Float((from + Int64(k)) % CountingSource.period) * CountingSource.scale {
                Issue.record("frame \(from + Int64(k)) of the timeline is not the source's after the resume")
                break
            }
        }
        // ... faded in from nothing, behind at least 100 ms of silence (the instant).
        let full = Float(from % CountingSource.period) * CountingSource.scale
        #expect(abs(samples[2 * (frames - resumed)]) < max(abs(full) / 100, 0.001))
        let silence = (0..<(frames - resumed)).reversed().prefix { samples[2 * $0] == 0 }.count
        #expect(silence >= 4410, "\(silence) frames of silence before the resume")
    }

    @Test("an instant gone (4 ms, 50 ms) on a device not yet playing: nothing is heard, nothing left out, and the start says it was missed by about that",
          arguments: [4, 50])
    func late(ms: Int64) throws {
        // A device that plays leaves out the frames due by then instead (1-20 ms late): the
        // rooms' process tests meet that on PulseAudio under load. The file device never
        // plays in real time, so this start is reckoned before it plays.
        let (samples, missed, caughtUp) = try run(lead: -ms)
        #expect(caughtUp == nil)
        let late = try #require(missed)
        #expect(late >= Double(ms) / 1000 && late < 1, "\(late) s")
        #expect(samples.allSatisfy { $0 == 0 })
    }

    @Test("the real-time clock and the monotonic one: an instant converted back and forth lands within 100 µs")
    func clocks() {
        let real = WallClock.nanoseconds() + 1_000_000_000
        let mono = WallClock.monotonic(atRealtime: real)
        let ahead = Int64(mono) - Int64(MonotonicClock.nanoseconds())
        #expect(abs(ahead - 1_000_000_000) < 2_000_000, "\(ahead) ns")
        let a = WallClock.monotonic(atRealtime: real), b = WallClock.monotonic(atRealtime: real)
        #expect(abs(Int64(a) - Int64(b)) < 100_000)
    }

    @Test("the clock's state is what adjtimex says; a test forces it only through STILLMOMENT_TEST_CLOCK")
    func clockState() {
        let c = ClockState.read()
        #expect(c.synchronised || c.estimatedErrorMicroseconds >= 0)
        #expect(!ClockState(synchronised: false, estimatedErrorMicroseconds: 0, maximumErrorMicroseconds: 0).fit(boundMilliseconds: 2))
        #expect(ClockState(synchronised: true, estimatedErrorMicroseconds: 1999, maximumErrorMicroseconds: 0).fit(boundMilliseconds: 2))
        #expect(!ClockState(synchronised: true, estimatedErrorMicroseconds: 2001, maximumErrorMicroseconds: 0).fit(boundMilliseconds: 2))
    }
}
