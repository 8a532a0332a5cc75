/// What a voice plays: stereo interleaved float frames at the engine's rate.
public protocol FrameSource: AnyObject {
    /// The length in engine frames, or nil when it does not end (a loop).
    var length: Int64? { get }
    /// Reads up to `frames` frames; fewer only at the end.
    func read(into buffer: UnsafeMutablePointer<Float>, frames: Int) throws(AudioError) -> Int
    /// Up to `frames` (> 0) frames where the source already holds them (its decoder's
    /// buffer), without a copy: valid until the next call on the source; empty only at the
    /// end. nil: the source has no such memory here (it resamples, or makes its frames),
    /// and `read` is the way.
    func borrow(frames: Int) throws(AudioError) -> UnsafeBufferPointer<Float>?
    /// Moves to `frame` (for a loop, any frame: it wraps).
    func seek(to frame: Int64) throws(AudioError)
}

extension FrameSource {
    public func borrow(frames: Int) throws(AudioError) -> UnsafeBufferPointer<Float>? { nil }
}

/// A decoder made into a FrameSource: resampled to the engine's rate where the file's
/// rate differs (libsoxr), mono put on both channels, and optionally looped.
///
/// A loop wraps at the decoder's exact trimmed length, before resampling, so the loop
/// period is the file's own length with no gap and no filter edge at the seam.
public final class DecodedSource: FrameSource {
    public let decoder: any AudioDecoder
    public let engineRate: Int
    public let loops: Bool
    /// Exact length of one pass in engine frames.
    public let passLength: Int64
    private let resampler: Resampler?
    private let chunk = 2048
    private var decodeBuffer: [Float]
    private var stereoBuffer: [Float]
    private var discardBuffer: [Float]    // what a resampled seek reads and drops
    private var produced: Int64 = 0       // engine frames produced since the last seek
    private var startFrame: Int64 = 0     // engine frame of the last seek
    private var drained = false
    private var decoderAtEnd = false
    private var pendingInput = 0          // stereo frames in stereoBuffer not yet resampled
    private var pendingOffset = 0
    /// One step of the rates' common grid (source and engine frames that fall at the same
    /// instant), for a resampled seek.
    private let gridStep: (source: Int64, engine: Int64)

    public init(decoder: any AudioDecoder, engineRate: Int, loop: Bool = false) throws(AudioError) {
        self.decoder = decoder
        self.engineRate = engineRate
        self.loops = loop
        let fmt = decoder.format
        guard fmt.channels >= 1, fmt.channels <= 2, fmt.sampleRate > 0 else {
            throw AudioError.invalidArgument("cannot play audio with \(fmt.channels) channels")
        }
        let total = decoder.totalFrames ?? 0
        var a = Int64(fmt.sampleRate), b = Int64(engineRate)
        while b != 0 { (a, b) = (b, a % b) }
        gridStep = (Int64(fmt.sampleRate) / max(a, 1), Int64(engineRate) / max(a, 1))
        if fmt.sampleRate == engineRate {
            resampler = nil
            passLength = total
        } else {
            resampler = try Resampler(from: fmt.sampleRate, to: engineRate, channels: 2)
            passLength = (total * Int64(engineRate) + Int64(fmt.sampleRate) / 2) / Int64(fmt.sampleRate)
        }
        decodeBuffer = [Float](repeating: 0, count: chunk * fmt.channels)
        stereoBuffer = [Float](repeating: 0, count: chunk * 2)
        discardBuffer = [Float](repeating: 0, count: resampler == nil ? 0 : chunk * 2)
        if loop && passLength == 0 {
            throw AudioError.noAudio(path: "(loop)")
        }
    }

    public convenience init(path: String, engineRate: Int, loop: Bool = false, knownFrames: Int64? = nil,
                            knownIndex: SeekIndex? = nil) throws(AudioError) {
        try self.init(decoder: try openDecoder(path: path, knownFrames: knownFrames, knownIndex: knownIndex),
                      engineRate: engineRate, loop: loop)
    }

    public var length: Int64? { loops ? nil : passLength }

    /// The file is at the engine's rate: its frames are not resampled.
    public var isAtEngineRate: Bool { resampler == nil }

    /// Reads stereo frames at the decoder's rate, wrapping at the end for a loop.
    private func readStereo(into out: UnsafeMutablePointer<Float>, frames: Int) throws(AudioError) -> Int {
        var got = 0
        var emptyPasses = 0
        while got < frames {
            let want = min(frames - got, chunk)
            let n: Int
            if decoder.format.channels == 2 {
                n = try decoder.read(into: out + got * 2, frames: want)
            } else {
                n = try decodeBuffer.withStorage { (buf) throws(AudioError) -> Int in
                    guard let base = buf.baseAddress else { return 0 }
                    let n = try decoder.read(into: base, frames: want)
                    for i in 0..<n {
                        out[(got + i) * 2] = base[i]
                        out[(got + i) * 2 + 1] = base[i]
                    }
                    return n
                }
            }
            got += n
            if n == 0 {
                guard loops else { break }
                emptyPasses += 1
                if emptyPasses > 1 { break }   // a file with no frames: never spin
                try decoder.seek(toFrame: 0)
            } else {
                emptyPasses = 0
            }
        }
        return got
    }

    /// Frames straight from a stereo decoder at the engine's rate (the common case: no
    /// copy between libmpg123 and the mix); nil when they are resampled or made stereo.
    public func borrow(frames: Int) throws(AudioError) -> UnsafeBufferPointer<Float>? {
        guard resampler == nil, decoder.format.channels == 2 else { return nil }
        let wanted = remaining(upTo: frames)
        guard wanted > 0 else { return UnsafeBufferPointer(start: nil, count: 0) }
        var part = try decoder.borrow(frames: wanted)
        if part.isEmpty && loops {
            // The end of a pass: wrap (a file with no frames stays empty: never spin).
            try decoder.seek(toFrame: 0)
            part = try decoder.borrow(frames: wanted)
        }
        produced += Int64(part.count / 2)
        return part
    }

    /// `frames`, or fewer where the pass ends (a loop never ends).
    private func remaining(upTo frames: Int) -> Int {
        loops ? frames : Int(max(0, min(Int64(frames), passLength - (startFrame + produced))))
    }

    public func read(into buffer: UnsafeMutablePointer<Float>, frames: Int) throws(AudioError) -> Int {
        let wanted = remaining(upTo: frames)
        guard wanted > 0 else { return 0 }
        guard let resampler else {
            let n = try readStereo(into: buffer, frames: wanted)
            produced += Int64(n)
            return n
        }
        var got = 0
        while got < wanted {
            if pendingInput == 0 && !decoderAtEnd {
                let n = try stereoBuffer.withStorage { (buf) throws(AudioError) -> Int in
                    guard let base = buf.baseAddress else { return 0 }
                    return try readStereo(into: base, frames: chunk)
                }
                pendingInput = n
                pendingOffset = 0
                if n == 0 { decoderAtEnd = true }
            }
            let result: (consumed: Int, produced: Int)
            if pendingInput > 0 {
                result = stereoBuffer.withUnsafeBufferPointer { buf in
                    guard let base = buf.baseAddress else { return (0, 0) }
                    return resampler.process(base + pendingOffset * 2, inputFrames: pendingInput,
                                             into: buffer + got * 2, capacity: wanted - got)
                }
                pendingInput -= result.consumed
                pendingOffset += result.consumed
            } else {
                if drained { break }
                result = resampler.process(nil, inputFrames: 0, into: buffer + got * 2, capacity: wanted - got)
                if result.produced == 0 { drained = true }
            }
            got += result.produced
        }
        // Pad the very end to the exact pass length (the filter may deliver a frame less).
        if !loops && got < wanted && drained {
            let pad = wanted - got
            (buffer + got * 2).update(repeating: 0, count: pad * 2)
            got = wanted
        }
        produced += Int64(got)
        return got
    }

    public func seek(to frame: Int64) throws(AudioError) {
        var target = max(0, frame)
        if loops, passLength > 0 { target %= passLength } else { target = min(target, passLength) }
        guard let resampler else {
            try decoder.seek(toFrame: target)
            restart(at: target)
            return
        }
        // The filter starts afresh from a point of both rates' common grid (where a source
        // frame and an engine frame fall at the same instant, as they do when playing
        // through from 0) far enough back for its state to be what playing through gives,
        // and the frames up to the target are read and dropped.
        let (start, source) = resampledStart(before: target)
        try decoder.seek(toFrame: source)
        resampler.reset()
        restart(at: start)
        var left = Int(target - start)
        while left > 0 {
            let n = try discardBuffer.withStorage { (buf) throws(AudioError) -> Int in
                guard let base = buf.baseAddress else { return 0 }
                return try read(into: base, frames: min(left, chunk))
            }
            if n == 0 { break }
            left -= n
        }
    }

    /// The source frames a resampled seek decodes before its target, for the filter to
    /// settle (libsoxr's high quality filter spans some hundred at most).
    static let resamplerPreroll: Int64 = 2048

    /// The engine frame and source frame a resampled seek to `target` starts from: the last
    /// point of the rates' common grid at least `resamplerPreroll` source frames before it,
    /// or 0. Rates with a coarse grid (more than 4,096 source frames a step) start from
    /// the nearest source frame instead, as no common point is near. In a loop the point is
    /// in the same pass: a target just after the seam starts from 0 with the filter fresh,
    /// as the first pass does (a later pass has the file's end in it: its first ms differ).
    private func resampledStart(before target: Int64) -> (engine: Int64, source: Int64) {
        let inRate = Int64(decoder.format.sampleRate), outRate = Int64(engineRate)
        let (sourceStep, engineStep) = gridStep
        let sourceTarget = target * inRate / outRate
        guard sourceStep <= 4096 else {
            return (target, (target * inRate + outRate / 2) / outRate)
        }
        let steps = max(0, (sourceTarget - Self.resamplerPreroll) / sourceStep)
        return (steps * engineStep, steps * sourceStep)
    }

    private func restart(at frame: Int64) {
        pendingInput = 0
        pendingOffset = 0
        decoderAtEnd = false
        drained = false
        startFrame = frame
        produced = 0
    }
}
