/// What a session is and where it came from (a timer, a guided meditation, its preview, a
/// scheduled bell), and the one rule of who may take the sound device from whom. The raw
/// values are the names on the wire (the protocol's `source` and `by`) and in the practice
/// log's `kind` column.
public enum SessionKind: String, Codable, Sendable, CaseIterable {
    case timer, guided, preview
    /// A bell only (scheduled): not practice.
    case bell

    /// A sit or a guided meditation: what the practice log records, and what the
    /// schedule's bells keep their quiet after.
    public var isPractice: Bool { self == .timer || self == .guided }

    /// What becomes of a session of this kind, playing (or starting), when `incoming` asks
    /// for the device. The one preemption rule:
    /// - a bell never interrupts anything: it rings only when nothing else plays (`refuse`);
    /// - a session of the same kind is replaced by the new one (`replace`);
    /// - a guided meditation that another kind takes the device from is kept, to be
    ///   resumed where it was (`suspend`);
    /// - anything else ends (`stop`): a timer, a preview or a bell.
    public func admits(_ incoming: SessionKind) -> Preemption {
        if incoming == .bell { return .refuse }
        if incoming == self { return .replace }
        return self == .guided ? .suspend : .stop
    }
}

/// What happens to the session playing when another asks for the device
/// (`SessionKind.admits(_:)`).
public enum Preemption: Sendable, Equatable, CaseIterable {
    /// The new session takes its place (it ends `replaced`).
    case replace
    /// It ends (`preempted` by the new one's kind).
    case stop
    /// It ends (`preempted`) and is kept, with its position, to be resumed.
    case suspend
    /// It plays on; the new session does not start.
    case refuse

    /// Why the session playing ends for `incoming`'s new one; nil when it plays on.
    public func endReason(for incoming: SessionKind) -> EndReason? {
        switch self {
        case .replace: return .replaced
        case .stop, .suspend: return .preempted(by: incoming)
        case .refuse: return nil
        }
    }
}
