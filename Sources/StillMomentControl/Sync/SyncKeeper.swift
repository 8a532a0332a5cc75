// The daemon's sync part: on a device paired with a hub, a cycle runs on a thread of its own
// when something waits to be uploaded (looked at once a minute, and 10 s after a session
// ends, which writes the practice log) and every 10 minutes otherwise (a cycle's thread and
// socket cost a few wake-ups: +0.6 a minute in all over 20 idle minutes by `perf stat`,
// BENCHMARKS.md, "Sync"). It is driven by the
// daemon's own loop turns (an idle daemon turns every 5 s), so it adds no wake-up of its
// own; a cycle that fails is logged once per new reason and tried again at the next look.
import Glibc
import Logging
import StillMomentAudio
import StillMomentCore
import Synchronization

final class SyncKeeper: Sendable {
    private struct State {
        var running = false
        var halted = false
        /// When the state was last looked at, and the next look due (MonotonicClock s).
        var nextLook = 0.0
        var lastCycle = -1e9
        var lastError: String?
        /// A cycle changed something here (the schedule is read again on the loop's thread).
        var changed = false
        /// Cycles in a row that found another holding the lock.
        var busy = 0
    }

    /// Seconds between looks and between cycles (a test shortens both with
    /// STILLMOMENT_TEST_SYNC_SECONDS; nothing else reads it).
    let lookEvery: Double
    let cycleEvery: Double

    private let store: LibraryStore
    private let log: Logger
    private let state = Mutex(State())

    init(store: LibraryStore, log: Logger) {
        self.store = store
        self.log = log
        let test = getenv("STILLMOMENT_TEST_SYNC_SECONDS").flatMap { Double(String(cString: $0)) }.flatMap { (0.5...600).contains($0) ? $0 : nil }
        lookEvery = test ?? 60
        cycleEvery = test ?? 600
    }

    /// A look soon (a session ended: its sit waits to be uploaded).
    func soon(_ now: Double) {
        let wait = min(10, lookEvery)
        state.withLock { $0.nextLook = min($0.nextLook, now + wait) }
    }

    /// Called from each loop turn: looks at the journal when due, and starts a cycle when
    /// one is wanted.
    func tick(_ now: Double) {
        let look = state.withLock { s -> Bool in
            guard !s.halted, !s.running, now >= s.nextLook else { return false }
            s.nextLook = now + lookEvery
            return true
        }
        guard look else { return }
        guard let duty = try? SyncService(store: store).duty(), duty.paired else { return }
        let wanted = state.withLock { s -> Bool in
            guard !s.halted, duty.waiting || now - s.lastCycle >= cycleEvery else { return false }
            s.running = true
            return true
        }
        guard wanted else { return }
        if !BackgroundThread.run({ [self] in cycle() }) {
            state.withLock { $0.running = false }
        }
    }

    /// Whether a cycle changed something here since the last ask (once).
    func takeChanged() -> Bool {
        state.withLock { s in
            defer { s.changed = false }
            return s.changed
        }
    }

    private func cycle() {
        let started = MonotonicClock.seconds()
        var failure: String?
        do throws(SyncError) {
            let report = try SyncPeer(store: store).cycle(stop: { [self] in state.withLock { $0.halted } })
            state.withLock {
                $0.busy = 0
                if report.changed > 0 { $0.changed = true }
            }
            if report.uploaded + report.changed > 0 {
                log.info("sync: \(report.uploaded) change(s) sent to \(report.hub), \(report.downloaded) received, \(report.changed) applied")
            }
        } catch {
            switch error {
            case .stopped: break
            case .busy:
                // Another cycle (a `sync now`) holds the lock: said once it has held it for
                // three looks (a stopped process holding it would stop sync for good).
                let busy = state.withLock { s -> Int in s.busy += 1; return s.busy }
                if busy == 3 { failure = error.text(.en) }
            default:
                failure = error.text(.en)
                // Pages may have been applied before it failed (a file's failure comes last).
                state.withLock { $0.changed = true }
            }
        }
        let report = state.withLock { s -> String? in
            s.running = false
            s.lastCycle = started
            defer { s.lastError = failure }
            return failure != s.lastError ? failure : nil
        }
        if let report { log.warning("sync: \(report) (tried again in a minute)") }
    }

    /// Stops looking and waits for a cycle under way (the daemon is exiting).
    func halt() {
        state.withLock { $0.halted = true }
        while state.withLock({ $0.running }) { usleep(5_000) }
    }
}
