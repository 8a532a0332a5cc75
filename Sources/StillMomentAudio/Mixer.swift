import CAudio

/// Mixes voices on the session timeline. It renders in blocks and splits each block at
/// every voice event (start, stop, the ends of fades), so every voice
/// starts, stops or changes on its exact frame. Within a piece the envelope is linear
/// and applied per frame. The sum goes through a soft limiter: it never wraps or clips
/// hard.
public final class Mixer {
    public let sampleRate: Int
    public private(set) var voices: [Voice] = []
    private var scratch: [Float]
    private let maxBlock: Int
    /// Errors from sources (a file that turned out damaged): the voice is dropped and
    /// the error kept here for the engine to report.
    public private(set) var errors: [AudioError] = []

    public init(sampleRate: Int, maxBlock: Int = 4096) {
        self.sampleRate = sampleRate
        self.maxBlock = maxBlock
        scratch = [Float](repeating: 0, count: maxBlock * 2)
    }

    public func add(_ voice: Voice) { voices.append(voice) }

    /// The score: entries sorted by start; `nextEntry` is the first not yet made.
    private var score: [ScoreEntry] = []
    private var nextEntry = 0
    private var made: Set<Int> = []

    /// Adds an entry to the score. Its voice is made when rendering reaches `start`.
    public func schedule(_ entry: ScoreEntry) {
        // Sessions schedule in time order: appending is the common case, and a binary
        // search places the rest, so a day of gongs costs O(n log n), not O(n²).
        if score.last.map({ $0.start <= entry.start }) ?? true {
            score.append(entry)
            return
        }
        var lo = 0, hi = score.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if score[mid].start <= entry.start { lo = mid + 1 } else { hi = mid }
        }
        score.insert(entry, at: lo)
        if lo < nextEntry { nextEntry += 1 }
    }

    private func make(_ entry: ScoreEntry) {
        guard !made.contains(entry.id) else { return }
        made.insert(entry.id)
        do {
            let voice = try entry.make()
            voices.append(voice)
        } catch {
            errors.append(error)
        }
    }

    /// Makes the voices of entries that start before `t1`.
    private func materialize(until t1: Int64) {
        while nextEntry < score.count && score[nextEntry].start < t1 {
            make(score[nextEntry])
            nextEntry += 1
        }
    }

    public func remove(id: Int) { voices.removeAll { $0.id == id } }

    /// Drops the score's entries that start at or after `t` (a session finished early).
    public func cutScore(from t: Int64) {
        let kept = score.filter { $0.start < t }
        nextEntry = min(nextEntry, kept.count)
        score = kept
    }

    public func removeAll() { voices.removeAll() }

    public func takeErrors() -> [AudioError] {
        defer { errors.removeAll() }
        return errors
    }

    /// Forgets voices that are silent for good before `frame` (the frame heard now:
    /// anything later may still be rendered again after a rewind).
    public func retire(before frame: Int64) {
        voices.removeAll { v in (v.end.map { $0 <= frame } ?? false) }
    }

    /// Positions every voice for rendering from timeline frame `t` (after a seek or a
    /// rewind).
    public func seek(to t: Int64) {
        // Voices of the score are made again around the new position, in the score's
        // order. One already made that sounds there too, as it was made, is kept: its
        // decoder seeks where it is open. (A guided meditation's file, opened again at
        // every seek and sought by a new decoder, took the render thread 31-45 ms in a
        // 10-minute MP3 without a Xing tag, while the device played silence: libmpg123
        // scans such a file for its length at every open, 28 ms here. With the tag, a new
        // decoder's exact seek reads the frame headers from the start: 0.9 ms to 0:23,
        // 8.9 ms to 3:47. Kept, the seek took 0.05-0.6 ms.)
        let scored = Set(score.map(\.id))
        var kept: [Int: Voice] = [:]
        for v in voices where scored.contains(v.id) && v.isAsMade { kept[v.id] = v }
        voices.removeAll { scored.contains($0.id) }
        made.removeAll()
        nextEntry = score.firstIndex { $0.start >= t } ?? score.count
        func keep(_ entry: ScoreEntry) -> Bool {
            guard let v = kept[entry.id] else { return false }
            made.insert(entry.id)
            voices.append(v)
            return true
        }
        for entry in score[..<nextEntry] where entry.overlaps(from: t, to: t + 1) {
            if !keep(entry) { make(entry) }
        }
        // Those that start right here are the render's to make (materialize), unless kept.
        for entry in score[nextEntry...].prefix(while: { $0.start == t }) { _ = keep(entry) }
        for v in voices { v.sourcePosition = nil }
        for v in voices where t >= v.start && (v.end.map { t < $0 } ?? true) {
            do {
                try v.source.seek(to: t - v.start)
                v.sourcePosition = t
            } catch {
                errors.append(error)
                v.setStop(v.start)
            }
        }
    }

    /// Renders `frames` stereo frames of timeline starting at `t` into `out`.
    public func render(into out: UnsafeMutablePointer<Float>, frames: Int, at t: Int64) {
        materialize(until: t + Int64(frames))
        var done = 0
        var bound: Float = 0        // no sample of the block is louder
        while done < frames {
            let pieceStart = t + Int64(done)
            var pieceEnd = t + Int64(frames)
            pieceEnd = min(pieceEnd, pieceStart + Int64(maxBlock))
            for v in voices {
                if let e = v.nextEvent(after: pieceStart), e < pieceEnd { pieceEnd = e }
            }
            let count = Int(pieceEnd - pieceStart)
            // The first voice that sounds writes the piece (and zeros what it does not
            // cover), the others add to it; a piece no voice sounds in is zeroed. (Zeroing
            // every block first, then adding, cost a pass over it for nothing.)
            // Each voice's pass also finds its loudest sample; their sum bounds the piece's.
            var written = false
            var pieceBound: Float = 0
            for v in voices {
                guard let voicePeak = mix(v, into: out + done * 2, frames: count, at: pieceStart, assign: !written) else { continue }
                written = true
                pieceBound += voicePeak
            }
            if !written { (out + done * 2).update(repeating: 0, count: count * 2) }
            bound = max(bound, pieceBound)
            done += count
        }
        softLimit(out, samples: frames * 2, bound: bound)
    }

    /// Mixes `v` into `out` (adds to it; with `assign`, writes all `frames` frames instead,
    /// zeros past the voice's end included). Returns the magnitude no sample it added
    /// exceeds, or nil when it did not write (the voice is silent there: `out` untouched).
    private func mix(_ v: Voice, into out: UnsafeMutablePointer<Float>, frames: Int, at t: Int64, assign: Bool) -> Float? {
        guard t >= v.start else { return nil }
        if let e = v.end, t >= e { return nil }
        // Reposition the source if the previous render did not end where this one starts.
        if v.sourcePosition != t {
            do {
                try v.source.seek(to: t - v.start)
            } catch {
                errors.append(error)
                v.setStop(t)
                return nil
            }
        }
        let g0 = v.envelope(t)
        let g1 = v.envelope(t + Int64(frames))
        let silent = g0 == g1 && g0 == 0
        let step = (g1 - g0) / Float(frames)
        var g = g0
        var peak: Float = 0
        // The frames come in parts: where the source holds them (a decoder's frame,
        // borrowed: no copy), else read into the scratch buffer.
        var n = 0
        do {
            while n < frames {
                let got: Int
                if let part = try v.source.borrow(frames: frames - n) {
                    guard let src = part.baseAddress, !part.isEmpty else { break }
                    got = part.count / 2
                    if !silent {
                        peak = max(peak, Self.apply(src, into: out + n * 2, frames: got, gain: &g, step: step, assign: assign))
                    }
                } else {
                    let (read, loudest) = try scratch.withStorage { (buf) throws(AudioError) -> (Int, Float) in
                        guard let base = buf.baseAddress else { return (0, 0) }
                        let got = try v.source.read(into: base, frames: frames - n)
                        if silent { return (got, 0) }
                        return (got, Self.apply(base, into: out + n * 2, frames: got, gain: &g, step: step, assign: assign))
                    }
                    got = read
                    peak = max(peak, loudest)
                    if got == 0 { break }
                }
                n += got
            }
        } catch {
            // A damaged file: the voice ends where its good frames end.
            errors.append(error)
            v.setStop(t + Int64(n))
            v.sourcePosition = t + Int64(n)
            if n == 0 || silent { return nil }
            if assign { (out + n * 2).update(repeating: 0, count: (frames - n) * 2) }
            return peak
        }
        v.sourcePosition = t + Int64(n)
        if n < frames && v.sourceEnd == nil { v.setStop(t + Int64(n)) }
        if silent { return nil }
        if assign && n < frames { (out + n * 2).update(repeating: 0, count: (frames - n) * 2) }
        return peak
    }

    /// `frames` frames of `src` times the gain (`gain`, moving by `step` a frame, carried
    /// on for the next part) written to (`assign`) or added to `out`. Returns the magnitude
    /// no product exceeds: found in the same pass at a steady gain (sm_gain); on a ramp
    /// (fades, pauses, seeks) infinity, so that the limiter looks at the block itself.
    @inline(__always)
    private static func apply(_ src: UnsafePointer<Float>, into out: UnsafeMutablePointer<Float>, frames: Int,
                              gain g: inout Float, step: Float, assign: Bool) -> Float {
        if step == 0 { return sm_gain(out, src, frames * 2, g, assign ? 1 : 0) }
        for i in 0..<frames {
            if assign {
                out[2 * i] = src[2 * i] * g
                out[2 * i + 1] = src[2 * i + 1] * g
            } else {
                out[2 * i] += src[2 * i] * g
                out[2 * i + 1] += src[2 * i + 1] * g
            }
            g += step
        }
        return .infinity
    }

    /// Leaves samples below 0.9 untouched and bends louder ones smoothly towards 1.0.
    /// `bound`: what the voices' passes found no sample of the block exceeds.
    @inline(__always)
    private func softLimit(_ out: UnsafeMutablePointer<Float>, samples: Int, bound: Float) {
        let knee: Float = 0.9
        // Nearly every block stays below the knee. The voices' passes bound it (sm_gain: no
        // pass of its own, 7.3 M of a 60-s render's instructions before); where the bound
        // is over the knee (a ramp, voices that add up), one pass finds out at a fraction
        // of the per-sample bend's cost, in C (sm_peak), where it becomes vector code.
        guard bound > knee, sm_peak(out, samples) > knee else { return }
        for i in 0..<samples {
            let x = out[i]
            let a = abs(x)
            if a > knee {
                let over = (a - knee) / (1 - knee)
                let y = knee + (1 - knee) * (over / (1 + over))
                out[i] = x < 0 ? -y : y
            }
        }
    }
}
