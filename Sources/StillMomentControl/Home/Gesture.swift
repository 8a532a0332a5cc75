// A button's gestures from its key's edges: a press, a hold (down for 1 s) and a double
// press (a second press within 400 ms), with contact chatter (an edge within 20 ms of the
// one before) counted as nothing. Pure: edges and the clock (ms) come in, gestures come out;
// `deadline` says when `tick` next has something to decide.
public struct Gesture: Sendable {
    public enum Kind: String, Sendable, Equatable, CaseIterable { case press, hold, double }

    public static let chatterMs: Int64 = 20
    public static let holdMs: Int64 = 1000
    public static let doubleMs: Int64 = 400

    /// Which gestures have an action: without hold and double, a press is taken at once on
    /// the key's going down; otherwise on its release (or once the double's time is over).
    let hasHold: Bool
    let hasDouble: Bool

    private enum Phase: Sendable {
        case idle
        case down(since: Int64)
        case waitingSecond(upAt: Int64)
        /// A gesture was taken: nothing until the key is released.
        case releasing
    }
    private var phase = Phase.idle
    private var raw = false
    private var accepted = false
    private var lastEdge = Int64.min / 2

    public init(hasHold: Bool, hasDouble: Bool) {
        self.hasHold = hasHold
        self.hasDouble = hasDouble
    }

    /// The key went down (true) or up (false) at `at` ms. Repeats are not edges.
    public mutating func key(down: Bool, at t: Int64) -> [Kind] {
        var out = tick(now: t)
        raw = down
        if down != accepted && t - lastEdge >= Self.chatterMs {
            out += accept(down, at: t)
        }
        return out
    }

    /// What is due at `now`: a settled edge after chatter, a hold, a press whose double
    /// did not come.
    public mutating func tick(now: Int64) -> [Kind] {
        var out: [Kind] = []
        if raw != accepted && now - lastEdge >= Self.chatterMs {
            out += accept(raw, at: lastEdge + Self.chatterMs)
        }
        switch phase {
        case .down(let since) where hasHold && now - since >= Self.holdMs:
            phase = .releasing
            out.append(.hold)
        case .waitingSecond(let upAt) where now - upAt >= Self.doubleMs:
            phase = .idle
            out.append(.press)
        default: break
        }
        return out
    }

    /// When `tick` next has something to decide (ms), if ever.
    public var deadline: Int64? {
        var d: [Int64] = []
        if raw != accepted { d.append(lastEdge + Self.chatterMs) }
        switch phase {
        case .down(let since) where hasHold: d.append(since + Self.holdMs)
        case .waitingSecond(let upAt): d.append(upAt + Self.doubleMs)
        default: break
        }
        return d.min()
    }

    private mutating func accept(_ down: Bool, at t: Int64) -> [Kind] {
        accepted = down
        lastEdge = t
        switch phase {
        case .idle:
            guard down else { return [] }
            if !hasHold && !hasDouble {
                phase = .releasing
                return [.press]
            }
            phase = .down(since: t)
        case .down:
            guard !down else { return [] }
            if hasDouble {
                phase = .waitingSecond(upAt: t)
            } else {
                phase = .idle
                return [.press]
            }
        case .waitingSecond:
            guard down else { return [] }
            phase = .releasing
            return [.double]
        case .releasing:
            if !down { phase = .idle }
        }
        return []
    }
}
