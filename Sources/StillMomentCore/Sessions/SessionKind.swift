/// What a session is and where it came from (a timer, a guided meditation, its preview, a
/// scheduled bell). The raw values are the names on the wire (the protocol's `source` and
/// `by`) and in the practice log's `kind` column.
public enum SessionKind: String, Codable, Sendable, CaseIterable {
    case timer, guided, preview
    /// A bell only (scheduled): not practice.
    case bell

    /// A sit or a guided meditation: what the practice log records, and what the
    /// schedule's bells keep their quiet after.
    public var isPractice: Bool { self == .timer || self == .guided }
}
