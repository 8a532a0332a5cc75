import CAudio
import Foundation
import Glibc
import Testing
@testable import StillMomentAudio

@Suite("Engine", .serialized)
struct EngineTests {
    @Test("the WAV sink holds exactly what was rendered")
    func wavSink() throws {
        let dir = TempDir()
        let path = dir.file("out.wav")
        _ = try renderCBR(.file(path: path, format: .float32))
        let wav = try WAV.read(path)
        #expect(wav.sampleRate == 44100 && wav.channels == 2 && wav.frames == 66150)
        let decoded = try decodeAll(try openDecoder(path: Fixtures.path("cbr.mp3")))
        #expect(wav.samples[0..<2000].allSatisfy { $0 == 0 })
        var worst: Float = 0
        for i in 0..<decoded.count { worst = max(worst, abs(wav.samples[2000 + i] - decoded[i] * 0.5)) }
        #expect(worst == 0)
        #expect(wav.samples[(2000 + decoded.count)...].allSatisfy { $0 == 0 })
        #expect(!FileManager.default.fileExists(atPath: path + ".part"))
    }

    @Test("the ALSA path, through the file: device, plays exactly what the engine rendered")
    func alsaFileDevice() throws {
        let dir = TempDir()
        let reference = dir.file("ref.wav")
        _ = try renderCBR(.file(path: reference, format: .float32))
        let captured = dir.file("alsa.wav")
        let engine = try renderCBR(.device(DeviceConfiguration(name: "file:FILE=\(captured),FORMAT=wav")))
        let stats = try #require(engine.statistics)
        #expect(stats.xruns == 0 && stats.silenceFrames == 0)
        #expect(engine.deviceInfo?.sampleFormat == "float")
        engine.stop()
        let a = try WAV.read(reference)
        let b = try WAV.read(captured, dataIsFloat: true)
        #expect(b.frames == a.frames)
        #expect(a.samples.elementsEqual(b.samples))
    }

    @Test("a period lasts a whole 20 ms by default: a whole number of frames at 44.1 and 48 kHz alike",
          arguments: [(44100, 882), (48000, 960)])
    func periodLength(rate: Int, frames: Int) throws {
        let engine = try AudioEngine(sampleRate: rate, sink: .device(DeviceConfiguration(name: "null", realtime: false)))
        #expect(engine.deviceInfo?.periodFrames == frames)
        #expect(engine.deviceInfo?.bufferFrames == 5 * frames)
        let plugged = try AudioEngine(sampleRate: rate, sink: .device(DeviceConfiguration(name: "plug:null", realtime: false)))
        #expect(plugged.deviceInfo?.periodFrames == frames)
        // A plug in front of what is not a card (here null) keeps the arithmetic of a rate
        // plugin's whole periods: a pause is a drop (alsa.c; behind plughw it is the card's).
        #expect(plugged.deviceInfo?.canPause == false)
    }

    @Test("an unknown device is a typed error with ALSA's reason and a hint")
    func unknownDevice() throws {
        do {
            _ = try AudioEngine(sink: .device(DeviceConfiguration(name: "no-such-device")))
            Issue.record("opened a device that does not exist")
        } catch {
            guard case .device(let e) = error else { Issue.record("\(error)"); return }
            #expect(e.kind == .noDevice)
            #expect(e.description.contains("no-such-device"))
            #expect(e.description.contains("Unknown PCM"))
            #expect(e.description.contains("aplay -L"))
            #expect(!e.description.contains("\n"))
        }
    }

    /// Plays an endless counting voice on the ALSA `file:` device, pausing, resuming
    /// and seeking, and returns the captured stream.
    func countingSession(_ body: (AudioEngine) throws -> Void) throws -> [Float] {
        try countingRun(body).samples
    }

    /// The same, with the output's statistics taken just before the stop.
    /// `plug`: the `file:` device behind ALSA's plug (a plugin chain in front of what is not
    /// a card: writes on its period boundaries, a pause is a drop and a resume a prepare).
    func countingRun(plug: Bool = false, _ body: (AudioEngine) throws -> Void) throws
        -> (samples: [Float], statistics: OutputStatistics?) {
        let dir = TempDir()
        let path = dir.file("count.wav")
        let file = "file:FILE=\(path),FORMAT=wav"
        // A small ring, so the render thread is never far ahead of the consumer.
        let config = DeviceConfiguration(name: plug ? "plug:\"\(file)\"" : file, ringFrames: 8192)
        let engine = try AudioEngine(sampleRate: 44100, sink: .device(config))
        engine.add(Voice(id: 1, source: CountingSource(), start: 0))
        try engine.start(end: nil)
        try body(engine)
        let statistics = engine.statistics
        engine.stop()
        return (try WAV.read(path, dataIsFloat: true).samples, statistics)
    }

    func waitFor(_ engine: AudioEngine, frame: Int64) {
        while engine.position < frame { usleep(200) }
    }

    @Test("pause and resume: nothing skipped or repeated, and no step larger than the ramp",
          arguments: [false, true])
    func pauseResume(plug: Bool) throws {
        var pausedAt: [Int64] = []
        let (samples, statistics) = try countingRun(plug: plug) { engine in
            #expect(engine.deviceInfo?.canPause == !plug)   // through the plug a pause is a drop
            for k in 1...3 {
                waitFor(engine, frame: Int64(k) * 30_000)
                engine.pause()
                #expect(engine.state == .paused)
                let p = engine.position
                pausedAt.append(p)
                usleep(20_000)
                #expect(engine.position == p)      // the timeline is frozen
                engine.resume()
            }
            waitFor(engine, frame: 120_000)
        }
        let rec = CountingSource.recover(samples)
        #expect(rec.count > 120_000)
        // Every audible frame is the next source frame: a continuous count.
        let breaks = rec.breaks
        #expect(breaks.isEmpty, "count breaks at \(breaks.prefix(5).map { "\($0): \(rec[$0 - 1]) -> \(rec[$0])" })")
        #expect(rec.first?.index == 0)
        // The ramps are ~5 ms (220 frames) long: the gain never jumps by more than one step.
        let step: Float = 1.0 / 220 + 1e-4
        var worst: Float = 0
        for i in 1..<(samples.count / 2) { worst = max(worst, abs(samples[2 * i + 1] - samples[2 * i - 1])) }
        var at = 0
        for i in 1..<(samples.count / 2) where abs(samples[2 * i + 1] - samples[2 * i - 1]) == worst { at = i; break }
        #expect(worst <= 0.5 * step, "largest gain step \(worst) at frame \(at) (\(samples[max(0, 2 * at - 7)...min(samples.count - 1, 2 * at + 7)].enumerated().filter { $0.offset % 2 == 1 }.map(\.element))), paused at \(pausedAt), output \(String(describing: statistics))")
        // The three pauses and the stop each faded out.
        let faded = rec.indices.dropFirst().filter { rec[$0].gain < 1 && rec[$0 - 1].gain == 1 }
        #expect(faded.count == 4)
        // The pause positions are where the audio stopped: the frame before the n-th
        // fade-in is the paused position - 1 (one fade-in for each of the three resumes).
        let fadeIns = rec.indices.dropLast().filter { rec[$0].gain < 0.006 && rec[$0 + 1].gain > rec[$0].gain }
        #expect(pausedAt.count == 3 && fadeIns.count == pausedAt.count, "\(pausedAt.count) pauses, \(fadeIns.count) fade-ins")
        for (p, i) in zip(pausedAt, fadeIns) {
            #expect(rec[i].index == p % CountingSource.period, "resumed at \(rec[i].index), paused at \(p)")
        }
    }

    @Test("after a seek (a flush at the consumer) to frame F the next frames come from F")
    func seek() throws {
        let samples = try countingSession { engine in
            waitFor(engine, frame: 20_000)
            engine.seek(to: 500_000)
            waitFor(engine, frame: 520_000)
            engine.pause()
            engine.seek(to: 1_000)
            engine.resume()
            waitFor(engine, frame: 10_000)
        }
        let rec = CountingSource.recover(samples)
        let jumps = rec.breaks.map { (rec[$0 - 1].index, rec[$0].index) }
        #expect(jumps.count == 2, "\(jumps.prefix(6))")
        #expect(jumps.first?.1 == 500_000 % CountingSource.period)
        #expect(jumps.last?.1 == 1_000)
        let step: Float = 1.0 / 220 + 1e-4
        var worst: Float = 0
        for i in 1..<(samples.count / 2) { worst = max(worst, abs(samples[2 * i + 1] - samples[2 * i - 1])) }
        #expect(worst <= 0.5 * step, "largest gain step \(worst)")
    }

    @Test("the limiter's peak is the largest magnitude wherever it lies, for any length")
    func peak() {
        for count in [0, 1, 7, 8, 9, 15, 16, 17, 4096, 8195] {
            for at in Set([0, count / 2, max(0, count - 1)]) where at < max(count, 1) {
                var x = (0..<count).map { Float(($0 * 7919) % 1000) / 2000 - 0.25 }
                if count > 0 { x[at] = at % 2 == 0 ? -0.95 : 0.95 }
                let expected = x.map(abs).max() ?? 0
                let got = x.withUnsafeBufferPointer { sm_peak($0.baseAddress, $0.count) }
                #expect(got == expected, "\(count) samples, the loudest at \(at): \(got) vs \(expected)")
                // A NaN after the loudest (in its lane or not) hides nothing.
                guard count > 1 else { continue }
                for nanAt in Set([(at + 8) % count, (at + 1) % count, count - 1]) where nanAt != at {
                    var y = x
                    y[nanAt] = .nan
                    let withNaN = y.withUnsafeBufferPointer { sm_peak($0.baseAddress, $0.count) }
                    #expect(withNaN == (y.filter { !$0.isNaN }.map(abs).max() ?? 0), "\(count) samples, NaN at \(nanAt): \(withNaN)")
                }
            }
        }
    }

    @Test("the mixer's gain pass writes or adds each product and returns the largest magnitude among them, for any length")
    func gainPass() {
        for count in [0, 1, 7, 8, 9, 15, 16, 17, 4096, 8195] {
            let src = (0..<count).map { Float(($0 * 7919) % 1000) / 1000 - 0.5 }
            for gain: Float in [0, 0.3, -1, 1.7] {
                for assign in [true, false] {
                    var out = (0..<count).map { Float($0 % 5) / 10 }
                    let before = out
                    let peak = src.withUnsafeBufferPointer { s in
                        out.withUnsafeMutableBufferPointer { sm_gain($0.baseAddress, s.baseAddress, count, gain, assign ? 1 : 0) }
                    }
                    let expected = (0..<count).map { (assign ? 0 : before[$0]) + src[$0] * gain }
                    #expect(out == expected, "\(count) samples at \(gain), assign \(assign)")
                    #expect(peak == (src.map { abs($0 * gain) }.max() ?? 0), "\(count) samples at \(gain): \(peak)")
                }
            }
            // A loud sample, then a NaN sixteen samples on (the same lane of the next turn).
            guard count >= 40 else { continue }
            var loud = src
            loud[3] = 0.95
            loud[19] = .nan
            var out = [Float](repeating: 0, count: count)
            let peak = loud.withUnsafeBufferPointer { s in
                out.withUnsafeMutableBufferPointer { sm_gain($0.baseAddress, s.baseAddress, count, 1, 1) }
            }
            #expect(peak == 0.95, "\(count) samples: the loud one hidden by a NaN after it (\(peak))")
        }
    }

    @Test("the limiter bends what goes past the knee, whether one voice or voices adding up put it there; below it nothing changes")
    func limiterBound() throws {
        final class Constant: FrameSource {
            let value: Float
            init(_ value: Float) { self.value = value }
            var length: Int64? { nil }
            func read(into buffer: UnsafeMutablePointer<Float>, frames: Int) throws(AudioError) -> Int {
                buffer.update(repeating: value, count: frames * 2)
                return frames
            }
            func seek(to frame: Int64) throws(AudioError) {}
        }
        func rendered(_ values: [Float], gain: Float = 1) -> [Float] {
            let mixer = Mixer(sampleRate: 44100, maxBlock: 256)
            for (i, v) in values.enumerated() { mixer.add(Voice(id: i, source: Constant(v), start: 0, gain: gain)) }
            var out = [Float](repeating: 9, count: 2000)
            out.withUnsafeMutableBufferPointer { if let base = $0.baseAddress { mixer.render(into: base, frames: 1000, at: 0) } }
            return out
        }
        let bent: Float = 0.9 + 0.1 * ((0.3 / 0.1) / (1 + 0.3 / 0.1))     // 1.2 through the curve
        #expect(rendered([0.6, 0.6]).allSatisfy { abs($0 - bent) < 1e-6 }, "two voices of 0.6")
        #expect(rendered([0.8], gain: 1.5).allSatisfy { abs($0 - bent) < 1e-6 }, "one voice of 0.8 at 1.5")
        #expect(rendered([0.3, 0.3, 0.29]).allSatisfy { abs($0 - 0.89) < 1e-6 }, "three voices below the knee")
        #expect(rendered([-0.6, 0.6]).allSatisfy { $0 == 0 }, "voices that cancel")
    }

    @Test("S16 conversion dithers within one LSB and never wraps")
    func s16() {
        var input: [Float] = [0, 0.5, -0.5, 1, -1, 2, -2, 1e-6]
        input += [Float](repeating: 0.25, count: 10000)
        var out = [Int16](repeating: 0, count: input.count)
        var state: UInt32 = 1
        sm_convert_s16(input, &out, input.count, &state)
        #expect(out[3] == 32767 || out[3] == 32766)
        #expect(out[5] == 32767 && out[6] == -32768)
        let mean = out[8...].reduce(0.0) { $0 + Double($1) } / 10000
        #expect(abs(mean - 0.25 * 32767) < 0.1)
        #expect(out[8...].allSatisfy { abs(Int($0) - 8192) <= 1 })
        // Odd input never wraps: NaN and infinities land on the rails.
        var odd: [Float] = [.nan, .infinity, -.infinity, -0.99999]
        var oddOut = [Int16](repeating: 0, count: odd.count)
        sm_convert_s16(&odd, &oddOut, odd.count, &state)
        #expect(oddOut[0] == -32768 && oddOut[1] == 32767 && oddOut[2] == -32768)
        #expect(abs(Int(oddOut[3]) + 32767) <= 1)
    }

    @Test("the ring keeps order across the wrap and refuses to overfill")
    func ring() throws {
        let ring = try #require(sm_ring_create(1000, 2))
        defer { sm_ring_destroy(ring) }
        #expect(sm_ring_capacity(ring) == 1024)
        var next: Float = 0
        var expected: Float = 0
        var chunk = [Float](repeating: 0, count: 2 * 700)
        var out = [Float](repeating: 0, count: 2 * 700)
        for _ in 0..<50 {
            for i in 0..<700 { chunk[2 * i] = next; chunk[2 * i + 1] = -next; next += 1 }
            #expect(sm_ring_write(ring, chunk, 700) == 700)
            #expect(sm_ring_write(ring, chunk, 700) == 324)   // only what fits
            next -= 376
            let n = sm_ring_read(ring, &out, 700)
            #expect(n == 700)
            for i in 0..<Int(n) {
                #expect(out[2 * i] == expected && out[2 * i + 1] == -expected)
                expected += 1
            }
            #expect(sm_ring_flush(ring) == 324)
            expected += 324
            next = expected
        }
    }
}
