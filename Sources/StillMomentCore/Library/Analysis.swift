import Glibc
import CEbur128
import StillMomentAudio

/// One pass over a file's audio: the exact length (what really decodes) and the loudness
/// (EBU R128 via libebur128), turned into a gain to -16 LUFS that keeps the true peak
/// under -1 dBTP.
public struct AudioAnalysis: Sendable, Equatable {
    public let frames: Int64
    public let sampleRate: Int
    public let loudness: Double?      // LUFS; nil for silence
    public let truePeak: Double       // dBTP
    public let gain: Double           // dB

    public static let targetLoudness = -16.0
    public static let peakCeiling = -1.0

    /// Decodes all of `decoder`, calling `progress` with the fraction done now and then.
    public static func run(_ decoder: any AudioDecoder, progress: (Double) -> Void = { _ in }) throws(AudioError) -> AudioAnalysis {
        let fmt = decoder.format
        // Integrated loudness from libebur128; the true peak from our own meter, which
        // oversamples only the blocks that can hold it.
        guard let meter = ebur128_init(UInt32(fmt.channels), UInt(fmt.sampleRate), Int32(EBUR128_MODE_I.rawValue)) else {
            throw AudioError.invalidArgument("cannot measure loudness at \(fmt)")
        }
        var state: UnsafeMutablePointer<ebur128_state>? = meter
        defer { ebur128_destroy(&state) }
        let chunk = 16384
        var buffer = [Float](repeating: 0, count: chunk * fmt.channels)
        var frames: Int64 = 0
        let expected = decoder.totalFrames ?? 0
        var lastReport: Int64 = 0
        var truePeak = TruePeakMeter(channels: fmt.channels)
        while true {
            let n = try buffer.withStorage { (buf) throws(AudioError) -> Int in
                guard let base = buf.baseAddress else { return 0 }
                let n = try decoder.read(into: base, frames: chunk)
                if n > 0 {
                    ebur128_add_frames_float(meter, base, n)
                    truePeak.add(base, frames: n)
                }
                return n
            }
            if n == 0 { break }
            frames += Int64(n)
            if expected > 0 && frames - lastReport > Int64(fmt.sampleRate) * 30 {
                lastReport = frames
                progress(min(1, Double(frames) / Double(expected)))
            }
        }
        var lufs = 0.0
        let loudness: Double? = ebur128_loudness_global(meter, &lufs) == 0 && lufs.isFinite ? lufs : nil
        let peak = Double(truePeak.peak)
        let peakDB = peak > 0 ? 20 * log10(peak) : -.infinity
        var gain = loudness.map { targetLoudness - $0 } ?? 0
        if peakDB.isFinite { gain = min(gain, peakCeiling - peakDB) }
        return AudioAnalysis(frames: frames, sampleRate: fmt.sampleRate, loudness: loudness,
                             truePeak: peakDB, gain: gain)
    }
}
