// A loop decoded once into memory, for a session rendered to a file: the ambience of a
// 30-minute timer is a loop of a few tens of seconds, decoded sixty times over by a
// DecodedSource; here one pass is decoded and every voice plays it from memory. The frames
// are the same (a DecodedSource at the engine's rate starts each pass from the decoder's
// frame 0, as the first), so the file is the same; only the work is not. Not for a device:
// the daemon holds no sound in memory (its RSS budget), and a file of another rate wraps
// before its resampler there, which a pass resampled once cannot do.
public final class LoopPass: @unchecked Sendable {
    /// One pass, stereo interleaved float at the engine's rate: written once while it is
    /// made, read only after (sources on the render thread lend parts of it out).
    private let samples: UnsafeMutableBufferPointer<Float>
    /// Frames of the pass.
    let count: Int
    public var passLength: Int64 { Int64(count) }

    /// Decodes one pass of `source` (a loop at the engine's rate: no resampler), or nil when
    /// it is resampled or longer than `maxFrames`.
    public static func decode(_ source: DecodedSource, maxFrames: Int64) throws(AudioError) -> LoopPass? {
        guard source.loops, source.isAtEngineRate, source.passLength > 0, source.passLength <= maxFrames else { return nil }
        let pass = LoopPass(frames: Int(source.passLength))
        guard let base = pass.samples.baseAddress else { return nil }
        var got = 0
        while got < pass.count {
            let n = try source.read(into: base + got * 2, frames: pass.count - got)
            if n == 0 { break }
            got += n
        }
        return got == pass.count ? pass : nil
    }

    private init(frames: Int) {
        count = frames
        samples = .allocate(capacity: frames * 2)
        samples.initialize(repeating: 0)
    }

    deinit { samples.deallocate() }

    /// Frames `from`..<`from + n` of the pass (within it).
    func part(from: Int, frames n: Int) -> UnsafeBufferPointer<Float> {
        UnsafeBufferPointer(rebasing: samples[(from * 2)..<((from + n) * 2)])
    }

    /// A voice's source: this pass, looped.
    public func source() -> MemoryLoopSource { MemoryLoopSource(self) }
}

/// A LoopPass played as a loop: lent out of memory, wrapping at the pass's end.
public final class MemoryLoopSource: FrameSource {
    private let pass: LoopPass
    private var position: Int = 0          // frame within the pass

    init(_ pass: LoopPass) { self.pass = pass }

    public var length: Int64? { nil }

    public func borrow(frames: Int) throws(AudioError) -> UnsafeBufferPointer<Float>? {
        let n = min(frames, pass.count - position)
        let part = pass.part(from: position, frames: n)
        position += n
        if position == pass.count { position = 0 }
        return part
    }

    public func read(into buffer: UnsafeMutablePointer<Float>, frames: Int) throws(AudioError) -> Int {
        var got = 0
        while got < frames {
            guard let part = try borrow(frames: frames - got), let base = part.baseAddress, !part.isEmpty else { break }
            (buffer + got * 2).update(from: base, count: part.count)
            got += part.count / 2
        }
        return got
    }

    public func seek(to frame: Int64) throws(AudioError) {
        let count = Int64(pass.count)
        position = Int(((frame % count) + count) % count)
    }
}
