import CAudio
import Glibc
import StillMomentAudio

/// One pass over a file's audio: the exact length (what really decodes), the integrated
/// loudness (EBU R128) and the true peak (BS.1770-4), turned into a gain to -16 LUFS that
/// keeps the true peak under -1 dBTP. Both are measured by CAudio's `sm_meter`, which the
/// tests hold to libebur128 (loudness) and to full 4x oversampling (true peak); it costs
/// about a tenth of the decoding, where libebur128 cost seven tenths.
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
        guard let meter = sm_meter_new(Int32(fmt.channels), Int32(fmt.sampleRate)) else {
            throw AudioError.invalidArgument("cannot measure loudness at \(fmt)")
        }
        defer { sm_meter_free(meter) }
        let chunk = 16384
        var buffer = [Float](repeating: 0, count: chunk * fmt.channels)
        var frames: Int64 = 0
        let expected = decoder.totalFrames ?? 0
        var lastReport: Int64 = 0
        while true {
            let n = try buffer.withStorage { (buf) throws(AudioError) -> Int in
                guard let base = buf.baseAddress else { return 0 }
                let n = try decoder.read(into: base, frames: chunk)
                if n > 0 { sm_meter_add(meter, base, n) }
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
        let measured = sm_meter_loudness(meter, &lufs)
        if measured == -2 { throw AudioError.invalidArgument("out of memory while measuring the loudness") }
        let loudness: Double? = measured == 0 && lufs.isFinite ? lufs : nil
        let peak = sm_meter_true_peak(meter)
        let peakDB = peak > 0 ? 20 * log10(peak) : -.infinity
        var gain = loudness.map { targetLoudness - $0 } ?? 0
        if peakDB.isFinite { gain = min(gain, peakCeiling - peakDB) }
        return AudioAnalysis(frames: frames, sampleRate: fmt.sampleRate, loudness: loudness,
                             truePeak: peakDB, gain: gain)
    }
}
