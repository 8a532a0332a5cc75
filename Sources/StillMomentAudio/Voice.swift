/// One source placed on the session timeline: it starts on an exact frame, with a gain,
/// an optional fade-in, and optionally fades out or stops at exact frames.
///
/// A voice belongs to the mixer's thread once it is added to an engine.
public final class Voice {
    public let id: Int
    public let source: any FrameSource
    /// The timeline frame of the source's first frame.
    public let start: Int64
    /// Frames of linear fade-in from `start`.
    public let fadeIn: Int64
    public let gain: Float
    /// A fade to silence starting at `fadeOutStart`, lasting `fadeOutFrames`; the voice ends with it.
    public private(set) var fadeOutStart: Int64?
    public private(set) var fadeOutFrames: Int64 = 0
    /// The frame at which the voice stops (exclusive), if any.
    public private(set) var stop: Int64?
    /// The stop it was made with: a voice whose stop or fade changed since (an error, its
    /// end found, a finish) is made again by a seek, not kept.
    private let madeStop: Int64?
    /// The source ran out at this timeline frame.
    public private(set) var sourceEnd: Int64?
    /// The timeline frame the source is positioned at (next frame to read).
    var sourcePosition: Int64?

    public init(id: Int, source: any FrameSource, start: Int64, gain: Float = 1,
                fadeIn: Int64 = 0, stop: Int64? = nil) {
        self.id = id
        self.source = source
        self.start = start
        self.gain = gain
        self.fadeIn = max(0, fadeIn)
        self.stop = stop
        madeStop = stop
        if let length = source.length { sourceEnd = start + length }
        sourcePosition = start
    }

    /// The frame after which this voice is silent for good (nil: never).
    public var end: Int64? {
        var e: Int64? = stop
        if let s = fadeOutStart { e = min(e ?? .max, s + fadeOutFrames) }
        if let s = sourceEnd { e = min(e ?? .max, s) }
        return e
    }

    public func fadeOut(at frame: Int64, over frames: Int64) {
        fadeOutStart = frame
        fadeOutFrames = max(1, frames)
    }

    public func setStop(_ frame: Int64?) { stop = frame }

    /// Neither stopped nor faded since it was made: a seek may keep it.
    var isAsMade: Bool { stop == madeStop && fadeOutStart == nil }

    /// The full envelope (gain, fade-in, fade-out) at frame t.
    @inline(__always)
    func envelope(_ t: Int64) -> Float {
        var g = gain
        if fadeIn > 0 && t < start + fadeIn { g *= Float(t - start) / Float(fadeIn) }
        if let s = fadeOutStart, t >= s {
            g *= t >= s + fadeOutFrames ? 0 : 1 - Float(t - s) / Float(fadeOutFrames)
        }
        return g
    }

    /// Frames after `t` where the envelope's slope changes or the voice starts/ends:
    /// the mixer splits its blocks there.
    func nextEvent(after t: Int64) -> Int64? {
        var best: Int64?
        func consider(_ f: Int64?) {
            if let f, f > t, f < (best ?? .max) { best = f }
        }
        consider(start)
        if fadeIn > 0 { consider(start + fadeIn) }
        if let s = fadeOutStart { consider(s); consider(s + fadeOutFrames) }
        consider(stop)
        consider(sourceEnd)
        return best
    }
}
