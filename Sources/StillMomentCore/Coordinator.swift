import Synchronization

/// Who may use the sound: one source at a time.
public enum AudioSource: String, Sendable, Equatable {
    case timer, guided, preview
}

/// Grants the audio session to one source at a time. A request from another source first
/// runs the current owner's conflict handler (a timer stops; a guided meditation pauses
/// and keeps its position), then grants. Only the owner can release. Handlers run outside
/// the lock, so a handler that releases or requests again cannot deadlock.
public final class AudioSessionCoordinator: Sendable {
    public typealias ConflictHandler = @Sendable (_ requester: AudioSource) -> Void

    private struct State {
        var owner: AudioSource?
        var handler: ConflictHandler?
    }
    private let state = Mutex(State())

    public init() {}

    public var owner: AudioSource? { state.withLock { $0.owner } }

    /// Takes the session for `source`; `onConflict` runs when another source takes it
    /// away later.
    public func request(_ source: AudioSource, onConflict: @escaping ConflictHandler) {
        let previous: ConflictHandler? = state.withLock { s in
            if s.owner == nil || s.owner == source {
                s.owner = source
                s.handler = onConflict
                return nil
            }
            return s.handler
        }
        guard let previous else { return }
        previous(source)                       // outside the lock
        state.withLock { s in
            s.owner = source
            s.handler = onConflict
        }
    }

    /// Gives the session up; does nothing unless `source` owns it. Returns whether it did.
    @discardableResult
    public func release(_ source: AudioSource) -> Bool {
        state.withLock { s in
            guard s.owner == source else { return false }
            s.owner = nil
            s.handler = nil
            return true
        }
    }
}
