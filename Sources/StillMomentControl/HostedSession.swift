// One session running in the daemon, with what its callers asked of it that the device
// worker has not carried out yet (a pause, a seek), so that status answers at once.
import StillMomentAudio
import StillMomentCore
import Synchronization

final class HostedSession: Sendable {
    /// The session itself, typed: what only one of them does (a timer's finish, a guided
    /// meditation's seek and the device it is resumed on). What kind it is, is `kind`.
    enum Player: Sendable {
        case timer(TimerSession)
        /// A guided meditation or its preview.
        case guided(GuidedSession, device: DeviceName)
        case bell(BellSession)
    }
    let id: Int
    let player: Player
    let runner: SessionRunner
    /// Paused as asked (the fade to silence may still be under way on the worker).
    let paused = Atomic<Bool>(false)
    /// A seek's target file position (ms) until the worker has made it.
    let seekTarget = Mutex<Int64?>(nil)
    /// Commands queued on the worker and not yet carried out: an engine that is done
    /// meanwhile (a seek to the end on a device that never blocks) is not over while a
    /// seek back is still to come.
    let queued = Atomic<Int>(0)
    /// When the last command for it was queued or carried out (MonotonicClock ns; at first
    /// its start): a request that arrived before then found the session elsewhere.
    let commandedAt = Atomic<UInt64>(MonotonicClock.nanoseconds())

    init(id: Int, player: Player, runner: SessionRunner) {
        self.id = id
        self.player = player
        self.runner = runner
    }

    var session: any Session { runner.session }

    /// What kind of session it is (a guided session says whether it is a preview).
    var kind: SessionKind { session.kind }

    var engine: AudioEngine {
        switch player {
        case .timer(let t): return t.engine
        case .guided(let g, _): return g.engine
        case .bell(let b): return b.engine
        }
    }

    var guided: GuidedSession? {
        if case .guided(let g, _) = player { return g }
        return nil
    }

    /// Queues a command on the worker, counted in `queued` until it is carried out.
    func command(on worker: DeviceWorker, _ name: String, _ work: @escaping @Sendable () -> Void) {
        queued.add(1, ordering: .acquiringAndReleasing)
        commandedAt.store(MonotonicClock.nanoseconds(), ordering: .releasing)
        worker.run(name) { [self] in
            work()
            // and when it was carried out (a seek's request that came in meanwhile found
            // the session before it)
            commandedAt.store(MonotonicClock.nanoseconds(), ordering: .releasing)
            queued.subtract(1, ordering: .acquiringAndReleasing)
            return nil
        }
    }

    /// Records why the session is ending (the first reason wins).
    func markEnding(_ why: EndReason) { runner.markEnding(why) }

    /// Whether the engine is done (played to its end, stopped or failed).
    var engineDone: Bool {
        let state = engine.state
        return state == .finished || state == .stopped || state == .failed
    }

    /// Over: the engine is done and no command for it waits on the worker.
    var isOver: Bool { queued.load(ordering: .acquiring) == 0 && engineDone }
}
