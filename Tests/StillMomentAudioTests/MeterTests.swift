import CEbur128
import Foundation
import StillMomentAudio
import Testing

/// `LoudnessMeter` (CLoudness's `sm_meter`, what import measures with) against the
/// references: libebur128's integrated loudness, and true peak by oversampling every
/// interval 4 times with the BS.1770-4 Annex 2 filter.
@Suite("Loudness and true peak meter")
struct MeterTests {
    static let phases: [[Double]] = [
        [0.0017089843750, 0.0109863281250, -0.0196533203125, 0.0332031250000, -0.0594482421875, 0.1373291015625,
         0.9721679687500, -0.1022949218750, 0.0476074218750, -0.0266113281250, 0.0148925781250, -0.0083007812500],
        [-0.0291748046875, 0.0292968750000, -0.0517578125000, 0.0891113281250, -0.1665039062500, 0.4650878906250,
         0.7797851562500, -0.2003173828125, 0.1015625000000, -0.0582275390625, 0.0330810546875, -0.0189208984375],
        [-0.0189208984375, 0.0330810546875, -0.0582275390625, 0.1015625000000, -0.2003173828125, 0.7797851562500,
         0.4650878906250, -0.1665039062500, 0.0891113281250, -0.0517578125000, 0.0292968750000, -0.0291748046875],
        [-0.0083007812500, 0.0148925781250, -0.0266113281250, 0.0476074218750, -0.1022949218750, 0.9721679687500,
         0.1373291015625, -0.0594482421875, 0.0332031250000, -0.0196533203125, 0.0109863281250, 0.0017089843750],
    ]

    /// The largest of |samples| and all four interpolated phases between every two
    /// samples (zeros beyond the ends), computed plainly in double precision.
    static func fullTruePeak(_ x: [Float], channels: Int) -> Double {
        let frames = x.count / channels
        var peak = 0.0
        for c in 0..<channels {
            func at(_ i: Int) -> Double { i >= 0 && i < frames ? Double(x[i * channels + c]) : 0 }
            for i in 0..<frames {
                peak = max(peak, abs(at(i)))
                // Phase p with x[i] at tap 6 and x[i+1] at tap 5: the signal at i + (2p+1)/8.
                for h in phases {
                    var y = 0.0
                    for t in 0..<12 { y += h[t] * at(i + 6 - t) }
                    peak = max(peak, abs(y))
                }
            }
        }
        return peak
    }

    static func libebur128Loudness(_ x: [Float], channels: Int, rate: Int) -> Double? {
        var state: UnsafeMutablePointer<ebur128_state>? = ebur128_init(UInt32(channels), UInt(rate), Int32(EBUR128_MODE_I.rawValue))
        defer { ebur128_destroy(&state) }
        x.withUnsafeBufferPointer { _ = ebur128_add_frames_float(state, $0.baseAddress, x.count / channels) }
        var lufs = 0.0
        return ebur128_loudness_global(state, &lufs) == 0 && lufs.isFinite ? lufs : nil
    }

    /// Our meter, fed in pieces of `piece` frames.
    static func ours(_ x: [Float], channels: Int, rate: Int, piece: Int) -> (loudness: Double?, peak: Double) {
        guard let meter = try? LoudnessMeter(channels: channels, sampleRate: rate) else { return (nil, -1) }
        x.withUnsafeBufferPointer { buf in
            guard let base = buf.baseAddress else { return }
            var i = 0
            let frames = x.count / channels
            while i < frames {
                let n = min(piece, frames - i)
                meter.add(base + i * channels, frames: n)
                i += n
            }
        }
        let loudness = (try? meter.loudness()) ?? nil
        return (loudness, meter.truePeak)
    }

    static func decode(_ name: String) throws -> (samples: [Float], channels: Int, rate: Int) {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/\(name)").path
        let decoder = try openDecoder(path: path)
        let frames = Int(decoder.totalFrames ?? 0)
        var samples = [Float](repeating: 0, count: frames * decoder.format.channels)
        let got = try samples.withStorage { (buf) throws(AudioError) -> Int in
            guard let base = buf.baseAddress else { return 0 }
            return try decoder.read(into: base, frames: frames)
        }
        #expect(got == frames)
        return (samples, decoder.format.channels, decoder.format.sampleRate)
    }

    @Test("on real decodes: loudness as libebur128's, true peak as full oversampling",
          arguments: ["cbr.mp3", "vbr.mp3", "editlist.m4a", "mpeg2-22050-mono.mp3", "layer2.mp2"])
    func decodes(_ name: String) throws {
        let (x, channels, rate) = try Self.decode(name)
        let got = Self.ours(x, channels: channels, rate: rate, piece: 777)
        let reference = Self.libebur128Loudness(x, channels: channels, rate: rate)
        #expect(reference != nil)
        if let reference, let loudness = got.loudness {
            #expect(abs(loudness - reference) < 1e-6, "ours \(loudness) LUFS vs libebur128 \(reference)")
        } else {
            Issue.record("no loudness measured for \(name)")
        }
        let full = Self.fullTruePeak(x, channels: channels)
        #expect(abs(got.peak - full) <= full * 1e-5, "ours \(got.peak) vs full oversampling \(full)")
    }

    @Test("an inter-sample peak 3 dB over the samples is found")
    func interSample() {
        // A sine at a quarter of the rate, sampled 45° off its crests: samples at 0.707 of it.
        let x = (0..<48000).map { Float(sin(Double.pi / 2 * Double($0) + Double.pi / 4)) * 0.9 }
        let sampleMax = Double(x.map(abs).max() ?? 0)
        let got = Self.ours(x, channels: 1, rate: 48000, piece: 1000)
        let full = Self.fullTruePeak(x, channels: 1)
        #expect(20 * log10(got.peak / sampleMax) > 2.5, "true peak \(got.peak) vs samples \(sampleMax)")
        #expect(abs(got.peak - full) <= full * 1e-5)
    }

    @Test("the pieces the audio comes in change nothing")
    func pieces() throws {
        let (x, channels, rate) = try Self.decode("vbr.mp3")
        let a = Self.ours(x, channels: channels, rate: rate, piece: 1)
        let b = Self.ours(x, channels: channels, rate: rate, piece: 4096)
        let c = Self.ours(x, channels: channels, rate: rate, piece: 100_000)
        #expect(a.peak == b.peak && b.peak == c.peak)
        #expect(a.loudness != nil && b.loudness != nil && c.loudness != nil)
        if let la = a.loudness, let lb = b.loudness, let lc = c.loudness {
            #expect(abs(la - lb) < 1e-9 && abs(lb - lc) < 1e-9)
        }
    }

    @Test("silence and less than 400 ms have no loudness")
    func silence() {
        #expect(Self.ours([Float](repeating: 0, count: 2 * 44100 * 3), channels: 2, rate: 44100, piece: 512).loudness == nil)
        var short = [Float](repeating: 0, count: 2 * (44100 * 3 / 10))
        for i in 0..<short.count / 2 { short[2 * i] = Float(0.5 * sin(Double(i) * 0.1)) }
        let got = Self.ours(short, channels: 2, rate: 44100, piece: 512)
        #expect(got.loudness == nil)
        #expect(got.peak > 0.49)
    }
}
