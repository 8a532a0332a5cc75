import CEbur128
import Foundation
import StillMomentAudio
import Testing
@testable import StillMomentCore

@Suite("True peak")
struct TruePeakTests {
    /// libebur128's own true peak (its slow full oversampling), for reference.
    func reference(_ samples: [Float], channels: Int, rate: Int) -> Double {
        var state: UnsafeMutablePointer<ebur128_state>? = ebur128_init(UInt32(channels), UInt(rate), Int32(EBUR128_MODE_TRUE_PEAK.rawValue))
        defer { ebur128_destroy(&state) }
        samples.withUnsafeBufferPointer { _ = ebur128_add_frames_float(state, $0.baseAddress, samples.count / channels) }
        var peak = 0.0
        for c in 0..<channels {
            var p = 0.0
            _ = ebur128_true_peak(state, UInt32(c), &p)
            peak = max(peak, p)
        }
        return 20 * log10(peak)
    }

    func ours(_ samples: [Float], channels: Int, blocks: Int = 1000) -> Double {
        var meter = TruePeakMeter(channels: channels)
        samples.withUnsafeBufferPointer { buf in
            var i = 0
            while i < samples.count / channels {
                let n = min(blocks, samples.count / channels - i)
                meter.add(buf.baseAddress! + i * channels, frames: n)
                i += n
            }
        }
        return 20 * log10(Double(meter.peak))
    }

    @Test("an inter-sample peak 3 dB over the samples is found, as libebur128 finds it")
    func interSample() {
        // A sine at a quarter of the rate, sampled 45° off its crests: samples at 0.707.
        let samples = (0..<48000).map { Float(sin(Double.pi / 2 * Double($0) + Double.pi / 4)) * 0.9 }
        let sampleMax = samples.map(abs).max() ?? 0
        #expect(20 * log10(Double(sampleMax)) < -3.5)
        let ref = reference(samples, channels: 1, rate: 48000)
        let got = ours(samples, channels: 1)
        #expect(abs(got - 20 * log10(0.9)) < 0.3, "ours \(got) dBTP")
        #expect(abs(got - ref) < 0.3, "ours \(got) vs libebur128 \(ref)")
    }

    @Test("on real decodes it agrees with libebur128 within 0.3 dB", arguments: ["cbr.mp3", "editlist.m4a", "vbr.mp3"])
    func decodes(_ name: String) throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/\(name)").path
        let decoder = try openDecoder(path: path)
        var samples = [Float](repeating: 0, count: Int(decoder.totalFrames ?? 0) * decoder.format.channels)
        _ = try samples.withUnsafeMutableBufferPointer { try decoder.read(into: $0.baseAddress!, frames: Int(decoder.totalFrames ?? 0)) }
        let ref = reference(samples, channels: decoder.format.channels, rate: decoder.format.sampleRate)
        let got = ours(samples, channels: decoder.format.channels, blocks: 777)
        #expect(abs(got - ref) < 0.3, "ours \(got) vs libebur128 \(ref)")
    }
}
