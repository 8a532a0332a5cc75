import Foundation
import Glibc
import StillMomentAudio
import Testing
@testable import StillMomentCore

/// End-to-end timer sessions rendered with the real decoders and sounds.
@Suite("Timer sessions, end to end", .serialized)
struct TimerSessionTests {
    static let sounds: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sounds").path
    let rate = 44100

    func catalog() throws -> SoundCatalog { try SoundCatalog.load(folder: Self.sounds) }

    func configuration(_ options: [String: String]) throws -> TimerConfiguration {
        try TimerConfiguration(settings: Settings(), options: options, catalog: try catalog())
    }

    /// Renders a session to a WAV file and reads it back (left channel and both).
    func render(_ options: [String: String], output: (TempFolder) -> SessionOutput = { .file(path: $0.file("s.wav")) },
                during: (TimerSession) -> Void = { _ in }) throws -> (plan: TimerPlan, samples: [Float]) {
        let dir = TempFolder()
        let session = try TimerSession(configuration: try configuration(options), catalog: try catalog(), output: output(dir))
        try session.start()
        during(session)
        #expect(session.wait() == .completed)
        session.engine.stop()
        let path: String
        switch output(dir) {
        case .file(let p, _): path = p
        case .device(let d): path = String(d.name.text.dropFirst("file:FILE=".count).prefix { $0 != "," })
        }
        return (session.plan, try readFloatWAV(path))
    }

    func decode(_ name: String) throws -> [Float] {
        let source = try DecodedSource(path: Self.sounds + "/" + name, engineRate: rate)
        var out = [Float](repeating: 0, count: Int(source.passLength) * 2)
        let n = try out.withUnsafeMutableBufferPointer { try source.read(into: $0.baseAddress!, frames: Int(source.passLength)) }
        #expect(n == Int(source.passLength))
        return out
    }

    /// The lag (in frames, within ±range) at which `pattern` best matches `signal` near
    /// `at`: the cross-correlation of their first differences (the strike's transient
    /// makes a sharp peak even under the ringing of an earlier strike), left channel.
    func bestLag(_ signal: [Float], _ pattern: [Float], at: Int, range: Int = 300, length: Int = 4096) -> Int {
        var best = (lag: Int.min, score: -Float.infinity)
        for lag in -range...range {
            var score: Float = 0
            let base = at + lag
            guard base >= 1, (base + length) * 2 <= signal.count else { continue }
            for k in 1..<length {
                let ds = signal[(base + k) * 2] - signal[(base + k - 1) * 2]
                let dp = pattern[k * 2] - pattern[(k - 1) * 2]
                score += ds * dp
            }
            if score > best.score { best = (lag, score) }
        }
        return best.lag
    }

    @Test("gongs start on their exact frames, and the session is preparation + duration + ring-out long")
    func gongOnsets() throws {
        let (plan, out) = try render(["duration": "2m", "preparation": "5s", "interval": "30s", "strikes": "2",
                                      "ambience": "forest"])
        let gong = try decode("temple-bell.mp3")
        let soft = try decode("soft-interval.mp3")
        let gongFrames = gong.count / 2
        #expect(plan.startStrikes == [5 * 44100, 9 * 44100])
        #expect(plan.intervalGongs == [35, 65, 95].map { Int64($0 * 44100) })
        #expect(plan.endStrikes == [125 * 44100, 129 * 44100])
        #expect(out.count / 2 == 129 * 44100 + gongFrames)
        #expect(plan.total == Int64(out.count / 2))
        for onset in plan.startStrikes + plan.endStrikes {
            #expect(bestLag(out, gong, at: Int(onset)) == 0, "gong at \(onset)")
        }
        for onset in plan.intervalGongs {
            #expect(bestLag(out, soft, at: Int(onset)) == 0, "interval gong at \(onset)")
        }
        // Before the first strike: the preparation is silent.
        #expect(out[0..<(5 * 44100 * 2)].allSatisfy { $0 == 0 })
    }

    @Test("a lone strike is the decoded gong, sample for sample, at its volume")
    func exactStrike() throws {
        let (plan, out) = try render(["duration": "30s", "preparation": "off", "gong-volume": "0.5"])
        let gong = try decode("temple-bell.mp3")
        var worst: Float = 0
        for k in 0..<gong.count { worst = max(worst, abs(out[k] - gong[k] * 0.5)) }
        #expect(worst == 0)
        let end = Int(plan.meditationEnd) * 2
        for k in 0..<gong.count { worst = max(worst, abs(out[end + k] - gong[k] * 0.5)) }
        #expect(worst == 0)
    }

    @Test("the ambience comes in after the start gong over 10 s at its level, and fades out over 3 s at zero")
    func ambience() throws {
        let (plan, out) = try render(["duration": "1m", "preparation": "off", "gong-volume": "0", "ambience": "forest",
                                      "ambience-volume": "0.2"])
        let forest = try decode("forest.m4a")
        let loop = forest.count / 2
        let a = try #require(plan.ambience)
        #expect(a.start == Int64(try decode("temple-bell.mp3").count / 2))
        #expect(a.fadeIn == 441_000 && a.fadeOut == 132_300 && a.fadeOutStart == 60 * 44100)
        #expect(out[0..<(Int(a.start) * 2)].allSatisfy { $0 == 0 })
        var worst: Float = 0
        for t in Int(a.start)..<Int(a.fadeOutStart + a.fadeOut) {
            let k = t - Int(a.start)
            var g: Float = 0.2
            if Int64(k) < a.fadeIn { g *= Float(k) / Float(a.fadeIn) }
            if Int64(t) >= a.fadeOutStart { g *= 1 - Float(Int64(t) - a.fadeOutStart) / Float(a.fadeOut) }
            for c in 0..<2 { worst = max(worst, abs(out[t * 2 + c] - forest[(k % loop) * 2 + c] * g)) }
        }
        #expect(worst < 1e-5, "largest difference from the expected ambience: \(worst)")
        #expect(out[(Int(a.fadeOutStart + a.fadeOut) * 2)...].allSatisfy { $0 == 0 })
        // The loop seam passes unnoticed: one loop is ~30 s, the session runs past it.
        #expect(Int(a.fadeOutStart - a.start) > loop)
    }

    let sessionOptions = ["duration": "1m", "preparation": "3s", "interval": "20s", "ambience": "forest"]

    @Test("the same session through the ALSA file: device gives the same stream")
    func alsaFileDevice() throws {
        let reference = try render(sessionOptions).samples
        let played = try render(sessionOptions, output: {
            .device(DeviceConfiguration(name: "file:FILE=\($0.file("alsa.wav")),FORMAT=wav"))
        }).samples
        #expect(played.count == reference.count)
        #expect(played.elementsEqual(reference))
    }

    @Test("pause and resume (library API) leave the schedule intact")
    func pauseResume() throws {
        let reference = try render(sessionOptions).samples
        // File sink: a pause freezes the render; the file is the same stream.
        let paused = try render(sessionOptions, during: { session in
            session.pause()
            usleep(30_000)
            #expect(session.isPaused)
            session.resume()
        }).samples
        #expect(paused.elementsEqual(reference))

        // ALSA file: device, paused while the interval gong rings: the output fades out
        // and in (5 ms each) around a short silence, and everything after continues
        // exactly where it was.
        let gongs = ["duration": "1m", "preparation": "3s", "interval": "20s"]
        let exact = try render(gongs).samples
        let (played, pausedAt) = try pausedOnDevice(gongs, at: 24 * 44100)
        try expectResumedExactly(played, exact, pausedAt: pausedAt) { worst in #expect(worst == 0) }

        // With the forest ambience: its AAC decoder restarts after the rewind, and the
        // codec's noise substitution (PNS) fills some bands with fresh noise, so the
        // samples differ by a little noise while the level stays the same.
        let (withAmbience, at) = try pausedOnDevice(sessionOptions, at: 30 * 44100)
        try expectResumedExactly(withAmbience, reference, pausedAt: at) { worst in #expect(worst < 0.1) }
        let shift = withAmbience.count - reference.count
        for second in 31..<60 {
            let a = rms(withAmbience, from: second * 44100 * 2 + shift, count: 44100 * 2)
            let b = rms(reference, from: second * 44100 * 2, count: 44100 * 2)
            // The noise's level over a second varies by a little too: 1.5 % once in a full
            // suite (36 s: 0.00828 against 0.00840). A lost or doubled gain is tens of %.
            #expect(abs(a / b - 1) < 0.03, "level at \(second) s: \(a) vs \(b)")
        }
    }

    /// Plays a session on the ALSA file: device, pausing for 20 ms once `frame` is heard.
    func pausedOnDevice(_ options: [String: String], at frame: Int64) throws -> ([Float], Int64) {
        var pausedAt: Int64 = 0
        let played = try render(options, output: {
            .device(DeviceConfiguration(name: "file:FILE=\($0.file("p.wav")),FORMAT=wav", ringFrames: 8192))
        }, during: { session in
            while session.position < frame { usleep(100) }
            session.pause()
            pausedAt = session.position
            usleep(20_000)
            #expect(session.position == pausedAt)
            session.resume()
        }).samples
        return (played, pausedAt)
    }

    /// Checks a paused-and-resumed stream against the uninterrupted one: identical up to
    /// the 5-ms fade-out before the pause point, silence, then (shifted by that silence)
    /// the same stream from the end of the 5-ms fade-in on; `check` gets the largest
    /// difference there.
    func expectResumedExactly(_ played: [Float], _ reference: [Float], pausedAt: Int64,
                              check: (Float) -> Void) throws {
        let frames = reference.count / 2
        let inserted = played.count / 2 - frames
        #expect(inserted > 0 && inserted < 2205, "inserted \(inserted) frames of silence")
        let ramp = 220
        let p = Int(pausedAt)
        #expect(played[0..<((p - ramp) * 2)].elementsEqual(reference[0..<((p - ramp) * 2)]))
        #expect(played[(p * 2)..<((p + inserted) * 2)].allSatisfy { $0 == 0 })
        let after = p + ramp
        let tail = played[((after + inserted) * 2)...]
        #expect(tail.count == reference.count - after * 2)
        var worst: Float = 0
        for (x, y) in zip(tail, reference[(after * 2)...]) { worst = max(worst, abs(x - y)) }
        check(worst)
    }

    func rms(_ s: [Float], from: Int, count: Int) -> Float {
        var sum: Float = 0
        for i in from..<min(s.count, from + count) { sum += s[i] * s[i] }
        return (sum / Float(count)).squareRoot()
    }
}

/// A temporary folder removed when done.
final class TempFolder {
    let path: String
    init() {
        var template = Array((NSTemporaryDirectory() + "/stillmoment-core-XXXXXX").utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = p.map { String(cString: $0) } ?? NSTemporaryDirectory()
    }
    func file(_ name: String) -> String { path + "/" + name }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Reads the float samples of a WAV file (ours, or ALSA's file: plugin, which labels
/// float data as PCM): the `data` chunk as 32-bit floats.
func readFloatWAV(_ path: String) throws -> [Float] {
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    var p = 12
    while p + 8 <= bytes.count {
        let id = String(decoding: bytes[p..<p + 4], as: UTF8.self)
        let size = Int(bytes[p + 4]) | Int(bytes[p + 5]) << 8 | Int(bytes[p + 6]) << 16 | Int(bytes[p + 7]) << 24
        if id == "data" {
            let body = bytes[(p + 8)..<min(bytes.count, p + 8 + size)]
            return body.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        }
        p += 8 + size + (size & 1)
    }
    return []
}

/// Sections and random bells, rendered: every strike on the frame the plan gives.
extension TimerSessionTests {
    @Test("a rendered sit-walk-sit session strikes each boundary on the plan's frames; random bells on theirs")
    func sectionOnsets() throws {
        let (plan, out) = try render(["sections": "sit 1m, walk 30s, sit 1m", "preparation": "2s",
                                      "random-bells": "20s-25s", "seed": "42", "ambience": "forest", "ambience-during": "sit"])
        let section = try decode("clear-strike.mp3")
        let soft = try decode("soft-interval.mp3")
        // Into the walk twice, 4 s apart; back into the sit once.
        let expected: [Int64] = [62, 66, 92].map { Int64($0) * 44100 }
        #expect(plan.sectionStrikes == expected)
        for onset in plan.sectionStrikes {
            #expect(bestLag(out, section, at: Int(onset)) == 0, "section strike at \(onset)")
        }
        #expect(!plan.randomBells.isEmpty)
        for onset in plan.randomBells {
            #expect(bestLag(out, soft, at: Int(onset)) == 0, "random bell at \(onset)")
            let ms = plan.milliseconds(onset - plan.meditationStart)
            let inSit = (0..<60_000).contains(ms) || (90_000..<150_000).contains(ms)
            #expect(inSit, "a bell in a walk at \(ms) ms")
        }
        // The ambience rests during the walk: one segment per sit.
        let segments = plan.ambienceSegments
        #expect(segments.count == 2)
        #expect(segments.first?.fadeOutStart == plan.meditationStart + 60 * 44100)
        #expect(segments.last?.start == plan.meditationStart + 90 * 44100)
        #expect(plan.total == Int64(out.count / 2))
    }
}

extension TimerSessionTests {
    @Test("finish ends an open sit with the end gong on the frame it takes effect, then its ring-out; the record says finished")
    func finishOpenSit() throws {
        let dir = TempFolder()
        let path = dir.file("open.wav")
        let c = try TimerConfiguration(request: try TimerRequest(text: ["open": "yes", "preparation": "off", "interval": "30s",
                                                                        "ambience": "forest"]), catalog: try catalog())
        #expect(c.openEnded && c.duration == TimerConfiguration.maxDuration)
        let session = try TimerSession(configuration: c, catalog: try catalog(), output: .file(path: path))
        let runner = try SessionRunner(session, rendered: true)
        while session.position < 70 * 44100 { usleep(1000) }
        runner.markEnding(.finished)
        session.finish()
        session.waitUntilOver(timeout: 60)
        #expect(session.wasFinished && session.playedToEnd)
        let record = runner.finish()
        #expect(record.endReason == .finished && record.plannedMilliseconds == 0 && record.summary == "open sit")
        #expect(record.heardMilliseconds >= 70_000 && record.heardMilliseconds < 600_000)
        let out = try readFloatWAV(path)
        let gong = try decode("temple-bell.mp3")
        let end = out.count / 2 - gong.count / 2          // the render ends with the gong's ring-out
        #expect(end > 70 * 44100)
        #expect(bestLag(out, gong, at: end) == 0, "the end gong starts on the finish frame")
        // Nothing else starts after the finish: the interval gong due after it was dropped.
        let heard = Int64(end) * 1000 / 44100
        #expect(record.heardMilliseconds == heard)
    }
}
