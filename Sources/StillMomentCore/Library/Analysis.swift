import Glibc
import StillMomentAudio

/// One pass over a file's audio: the exact length (what really decodes), the integrated
/// loudness (EBU R128) and the true peak (BS.1770-4), turned into a gain to -16 LUFS that
/// keeps the true peak under -1 dBTP. Both are measured by the audio layer's
/// `LoudnessMeter`, which the tests hold to libebur128 (loudness) and to full 4x
/// oversampling (true peak); it costs about a tenth of the decoding, where libebur128 cost
/// seven tenths.
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
        let meter = try LoudnessMeter(channels: fmt.channels, sampleRate: fmt.sampleRate)
        let chunk = 16384
        var buffer = [Float](repeating: 0, count: chunk * fmt.channels)
        var frames: Int64 = 0
        let expected = decoder.totalFrames ?? 0
        var lastReport: Int64 = 0
        while true {
            let n = try buffer.withStorage { (buf) throws(AudioError) -> Int in
                guard let base = buf.baseAddress else { return 0 }
                let n = try decoder.read(into: base, frames: chunk)
                meter.add(base, frames: n)
                return n
            }
            if n == 0 { break }
            frames += Int64(n)
            if expected > 0 && frames - lastReport > Int64(fmt.sampleRate) * 30 {
                lastReport = frames
                progress(min(1, Double(frames) / Double(expected)))
            }
        }
        let loudness = try meter.loudness()
        let peak = meter.truePeak
        let peakDB = peak > 0 ? 20 * log10(peak) : -.infinity
        var gain = loudness.map { targetLoudness - $0 } ?? 0
        if peakDB.isFinite { gain = min(gain, peakCeiling - peakDB) }
        return AudioAnalysis(frames: frames, sampleRate: fmt.sampleRate, loudness: loudness,
                             truePeak: peakDB, gain: gain)
    }
}
