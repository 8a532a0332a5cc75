import Synchronization

/// Grants the audio session to one source at a time. A request from another source first
/// runs the current owner's conflict handler (a timer stops; a guided meditation pauses
/// and keeps its position), then grants. Only the owner can release. Handlers run outside
/// the lock, so a handler that releases or requests again cannot deadlock.
public final class AudioSessionCoordinator: Sendable {
    public typealias ConflictHandler = @Sendable (_ requester: SessionKind) -> Void

    private struct State {
        var owner: SessionKind?
        var handler: ConflictHandler?
    }
    private let state = Mutex(State())

    public init() {}

    public var owner: SessionKind? { state.withLock { $0.owner } }

    /// Takes the session for `source`; `onConflict` runs when another source takes it
    /// away later. While an owner's handler runs, it is taken out of the state, so a
    /// request made from inside a handler is granted at once (not sent back into the same
    /// handler); the outer request then preempts whoever owns the session by then.
    public func request(_ source: SessionKind, onConflict: @escaping ConflictHandler) {
        while true {
            let pending: ConflictHandler? = state.withLock { s in
                if s.owner == nil || s.owner == source || s.handler == nil {
                    s.owner = source
                    s.handler = onConflict
                    return nil
                }
                defer { s.handler = nil }
                return s.handler
            }
            guard let pending else { return }
            pending(source)                    // outside the lock
        }
    }

    /// Gives the session up; does nothing unless `source` owns it. Returns whether it did.
    @discardableResult
    public func release(_ source: SessionKind) -> Bool {
        state.withLock { s in
            guard s.owner == source else { return false }
            s.owner = nil
            s.handler = nil
            return true
        }
    }
}
