/// True peak (ITU-R BS.1770-4, Annex 2): the signal oversampled 4 times with the
/// standard's 48-tap interpolation filter, evaluated only where it can matter.
///
/// An inter-sample peak lies between two samples, and exceeds them by a few dB at most;
/// so only the intervals next to a sample of at least half the true peak found so far
/// (−6 dB) are interpolated. On ordinary programme that is a small fraction of the
/// samples, which makes the measure cheap next to decoding (libebur128's true-peak mode
/// oversamples everything and costs about five times its loudness measurement).
struct TruePeakMeter {
    static let taps = 12
    /// Four phases of twelve taps each (BS.1770-4, Annex 2, Table 1). Phase p applied at
    /// input index n gives the signal at n − 6 + p/4.
    static let phases: [[Float]] = [
        [0.0017089843750, 0.0109863281250, -0.0196533203125, 0.0332031250000, -0.0594482421875, 0.1373291015625,
         0.9721679687500, -0.1022949218750, 0.0476074218750, -0.0266113281250, 0.0148925781250, -0.0083007812500],
        [-0.0291748046875, 0.0292968750000, -0.0517578125000, 0.0891113281250, -0.1665039062500, 0.4650878906250,
         0.7797851562500, -0.2003173828125, 0.1015625000000, -0.0582275390625, 0.0330810546875, -0.0189208984375],
        [-0.0189208984375, 0.0330810546875, -0.0582275390625, 0.1015625000000, -0.2003173828125, 0.7797851562500,
         0.4650878906250, -0.1665039062500, 0.0891113281250, -0.0517578125000, 0.0292968750000, -0.0291748046875],
        [-0.0083007812500, 0.0148925781250, -0.0266113281250, 0.0476074218750, -0.1022949218750, 0.9721679687500,
         0.1373291015625, -0.0594482421875, 0.0332031250000, -0.0196533203125, 0.0109863281250, 0.0017089843750],
    ]
    private static let flat: [Float] = phases[1] + phases[2] + phases[3]

    let channels: Int
    private(set) var peak: Float = 0            // linear
    private var history: [Float]                 // the last `taps` frames, per channel
    private var work: [Float] = []

    init(channels: Int) {
        self.channels = channels
        history = [Float](repeating: 0, count: Self.taps * channels)
    }

    /// Adds `frames` interleaved frames.
    mutating func add(_ samples: UnsafePointer<Float>, frames: Int) {
        guard frames > 0 else { return }
        let ch = channels
        let taps = Self.taps
        let total = taps + frames
        if work.count < total { work = [Float](repeating: 0, count: total) }
        for c in 0..<ch {
            for k in 0..<taps { work[k] = history[k * ch + c] }
            for k in 0..<frames { work[taps + k] = samples[k * ch + c] }
            work.withUnsafeBufferPointer { w in
                Self.flat.withUnsafeBufferPointer { h in
                    guard let x = w.baseAddress, let coeffs = h.baseAddress else { return }
                    // Sample j of `work` (each sample once over the blocks: those within 6
                    // of the end wait for the next block, when the filter can reach them).
                    for j in 6..<(total - 6) {
                        let a = abs(x[j])
                        if a > peak { peak = a }
                        guard a * 2 >= peak else { continue }
                        // The intervals (j-1, j) and (j, j+1): phases 1-3 at n = j+5 and j+6.
                        for n in (j + 5)...(j + 6) {
                            for p in 0..<3 {
                                var acc: Float = 0
                                let hp = coeffs + p * taps
                                for t in 0..<taps { acc += hp[t] * x[n - t] }
                                if abs(acc) > peak { peak = abs(acc) }
                            }
                        }
                    }
                }
            }
        }
        // Keep the last frames for the next block's filter.
        let keep = min(frames, Self.taps)
        if keep < Self.taps {
            history.removeFirst(keep * ch)
            history.append(contentsOf: UnsafeBufferPointer(start: samples, count: keep * ch))
        } else {
            history = Array(UnsafeBufferPointer(start: samples + (frames - keep) * ch, count: keep * ch))
        }
    }
}
