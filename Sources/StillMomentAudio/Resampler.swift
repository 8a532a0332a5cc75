import CSoxr

/// Sample-rate conversion through libsoxr (high quality, single thread), interleaved
/// float in and out.
final class Resampler {
    let inputRate: Int
    let outputRate: Int
    let channels: Int
    private let soxr: soxr_t

    init(from inputRate: Int, to outputRate: Int, channels: Int) throws(AudioError) {
        self.inputRate = inputRate
        self.outputRate = outputRate
        self.channels = channels
        var io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
        var quality = soxr_quality_spec(UInt(SOXR_HQ), 0)
        var runtime = soxr_runtime_spec(1)
        var error: soxr_error_t?
        let s = soxr_create(Double(inputRate), Double(outputRate), UInt32(channels), &error, &io, &quality, &runtime)
        guard let s, error == nil else {
            throw AudioError.invalidArgument(
                "cannot resample \(inputRate) Hz to \(outputRate) Hz: \(error.map { String(cString: $0) } ?? "libsoxr failed")")
        }
        soxr = s
    }

    deinit { soxr_delete(soxr) }

    /// Converts `inputFrames` frames (nil input drains the filter at the end of the
    /// stream). Returns frames consumed and produced.
    func process(_ input: UnsafePointer<Float>?, inputFrames: Int,
                 into output: UnsafeMutablePointer<Float>, capacity: Int) -> (consumed: Int, produced: Int) {
        var consumed = 0, produced = 0
        _ = soxr_process(soxr, input, input == nil ? 0 : inputFrames, &consumed, output, capacity, &produced)
        return (consumed, produced)
    }

    /// Forgets all state (after a seek).
    func reset() { _ = soxr_clear(soxr) }
}
