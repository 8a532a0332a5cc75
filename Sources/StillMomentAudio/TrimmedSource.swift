/// A window of another source: from `offset` for `length` frames (a meditation's trim
/// range, or a preview).
public final class TrimmedSource: FrameSource {
    public let source: any FrameSource
    public let offset: Int64
    public let length: Int64?
    private var position: Int64 = 0

    public init(_ source: any FrameSource, offset: Int64, length: Int64?) throws(AudioError) {
        self.source = source
        self.offset = max(0, offset)
        if let total = source.length {
            self.length = max(0, min(length ?? .max, total - self.offset))
        } else {
            self.length = length
        }
        try source.seek(to: self.offset)
    }

    /// `frames`, or fewer where the window ends.
    private func remaining(upTo frames: Int) -> Int {
        length.map { Int(max(0, min(Int64(frames), $0 - position))) } ?? frames
    }

    public func read(into buffer: UnsafeMutablePointer<Float>, frames: Int) throws(AudioError) -> Int {
        let want = remaining(upTo: frames)
        guard want > 0 else { return 0 }
        let n = try source.read(into: buffer, frames: want)
        position += Int64(n)
        return n
    }

    public func borrow(frames: Int) throws(AudioError) -> UnsafeBufferPointer<Float>? {
        let want = remaining(upTo: frames)
        guard want > 0 else { return UnsafeBufferPointer(start: nil, count: 0) }
        guard let part = try source.borrow(frames: want) else { return nil }
        position += Int64(part.count / 2)
        return part
    }

    public func seek(to frame: Int64) throws(AudioError) {
        position = max(0, min(frame, length ?? frame))
        try source.seek(to: offset + position)
    }
}
