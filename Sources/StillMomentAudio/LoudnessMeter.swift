import CLoudness

/// Integrated loudness (ITU-R BS.1770-4 / EBU R128) and true peak (BS.1770-4 Annex 2) of
/// a whole programme, in one pass: CLoudness's `sm_meter`, which the tests hold to
/// libebur128 (loudness) and to full 4x oversampling (true peak). Used from one thread
/// at a time; about 4 KB per channel plus 0.3 MB per hour of programme.
public final class LoudnessMeter {
    private let meter: OpaquePointer

    /// 1 to 8 channels, 8000 to 192000 Hz.
    public init(channels: Int, sampleRate: Int) throws(AudioError) {
        guard (1...8).contains(channels), (8000...192_000).contains(sampleRate),
              let meter = sm_meter_new(Int32(channels), Int32(sampleRate)) else {
            throw AudioError.invalidArgument("cannot measure loudness of \(channels) channels at \(sampleRate) Hz")
        }
        self.meter = meter
    }

    deinit { sm_meter_free(meter) }

    /// Interleaved frames, in any number of calls of any size.
    public func add(_ interleaved: UnsafePointer<Float>, frames: Int) {
        if frames > 0 { sm_meter_add(meter, interleaved, frames) }
    }

    /// Integrated loudness in LUFS; nil when no block passed the gates (silence, or less
    /// than 400 ms of audio).
    public func loudness() throws(AudioError) -> Double? {
        var lufs = 0.0
        let measured = sm_meter_loudness(meter, &lufs)
        if measured == -2 { throw AudioError.invalidArgument("out of memory while measuring the loudness") }
        return measured == 0 && lufs.isFinite ? lufs : nil
    }

    /// Linear true peak, the largest over the channels, of everything added so far.
    public var truePeak: Double { sm_meter_true_peak(meter) }
}
