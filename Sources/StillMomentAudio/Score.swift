/// One entry of a session's score: a voice that plays from `start` until `end`
/// (exclusive; nil for one that plays until it is stopped), made only when the render
/// reaches it. A 24-hour timer with a gong every minute therefore holds 1,440 small
/// entries, not 1,440 open decoders, and a seek back makes the voices again.
public struct ScoreEntry: Sendable {
    public let id: Int
    public let start: Int64
    public let end: Int64?
    /// Makes the voice (opens its decoder). Runs on the render thread.
    public let make: @Sendable () throws(AudioError) -> Voice

    public init(id: Int, start: Int64, end: Int64?, make: @escaping @Sendable () throws(AudioError) -> Voice) {
        self.id = id
        self.start = start
        self.end = end
        self.make = make
    }

    func overlaps(from t0: Int64, to t1: Int64) -> Bool {
        start < t1 && (end.map { $0 > t0 } ?? true)
    }
}

/// How a session ends early on purpose (`finish`): a fade for what sounds and the entries
/// to play from the frame the finish takes effect (made on the render thread).
public struct FinishPlan: Sendable {
    public let fade: Int64
    public let entries: @Sendable (Int64) -> [ScoreEntry]
    public init(fade: Int64, entries: @escaping @Sendable (Int64) -> [ScoreEntry]) {
        self.fade = fade
        self.entries = entries
    }
}
