// The daemon's one piece of housekeeping while nothing plays: it stores the frame index of
// MP3 meditations that have none (imported before the index was kept, or adopted by a
// repair), so that a start or a seek far into them reads a few frames instead of every
// frame before (what `library verify --repair` does, without anyone having to run it), and
// the length of imported sounds that have none (a long untagged MP3 ambience is otherwise
// scanned for it at each start). One file at a time on a background thread; it stops
// between files as soon as a session starts and goes on when the daemon is idle again;
// its thread runs at nice 19 in the idle I/O class, so the file it is reading when a
// session starts does not compete with it. A file it could not do (an M4A needs no index;
// one that cannot be read) is not tried again by this daemon; a catalog it could not read
// is looked at again after 10 minutes.
import CSystem
import Glibc
import Logging
import StillMomentAudio
import StillMomentCore
import Synchronization

final class BackgroundIndexer: Sendable {
    private struct State {
        var running = false
        var stop = false
        var finished = false
        var tried: Set<String> = []
        var stored = 0
        var counted = 0
        /// Set when a run ends; the daemon takes it (to release the code pages it touched).
        var justEnded = false
        /// No run before this (MonotonicClock seconds): after a catalog that could not be read.
        var notBefore = 0.0
    }

    private let store: LibraryStore
    private let log: Logger
    private let state = Mutex(State())

    init(store: LibraryStore, log: Logger) {
        self.store = store
        self.log = log
    }

    /// Starts (or goes on with) the work unless it runs or is done.
    func start() {
        let now = MonotonicClock.seconds()
        let go = state.withLock { s -> Bool in
            s.stop = false
            guard !s.running, !s.finished, now >= s.notBefore else { return false }
            s.running = true
            return true
        }
        guard go else { return }
        // A thread of its own (sm_run_background), which holds the indexer until it ends.
        let context = Unmanaged.passRetained(self)
        let rc = sm_run_background({ raw in
            guard let raw else { return }
            Unmanaged<BackgroundIndexer>.fromOpaque(raw).takeRetainedValue().work()
        }, context.toOpaque())
        if rc != 0 {
            context.release()
            state.withLock { $0.running = false }
        }
    }

    /// Asks it to stop after the file it is reading (a session is starting).
    func pause() {
        state.withLock { $0.stop = true }
    }

    /// Stops it and waits for the file it is reading (the daemon is exiting).
    func halt() {
        pause()
        while isRunning { usleep(5_000) }
    }

    var isRunning: Bool { state.withLock { $0.running } }
    var isFinished: Bool { state.withLock { $0.finished } }
    /// Indexes stored by this daemon.
    var stored: Int { state.withLock { $0.stored } }
    /// Sound lengths stored by this daemon.
    var counted: Int { state.withLock { $0.counted } }

    /// True once after each run (finished or paused).
    func takeEnded() -> Bool {
        state.withLock { s in
            defer { s.justEnded = false }
            return s.justEnded
        }
    }

    /// One file's work: an MP3 meditation's frame index, or an imported sound's length.
    private enum Job {
        case index(Meditation)
        case length(CustomSound)

        /// Which file (a sound by its stored file: one imported again under its name is new).
        var key: String {
            switch self {
            case .index(let m): "m:" + m.id
            case .length(let sound): "s:" + sound.storedFile
            }
        }

        var what: String {
            switch self {
            case .index(let m): "the frame index of \(m.id)"
            case .length(let sound): "the length of the sound \(sound.id)"
            }
        }
    }

    private func work() {
        var complete = false
        var storedNow = 0, countedNow = 0
        defer {
            let (stored, counted) = state.withLock { s -> (Int, Int) in
                s.running = false
                s.justEnded = true
                if complete { s.finished = true }
                s.stored += storedNow
                s.counted += countedNow
                return (s.stored, s.counted)
            }
            if complete && stored > 0 {
                log.info("stored the frame index of \(stored) MP3 meditation(s) imported before it was kept (a start or seek far into them reads less)")
            }
            if complete && counted > 0 {
                log.info("stored the length of \(counted) imported sound(s) (a session no longer counts them at each start)")
            }
        }
        let tried = state.withLock { $0.tried }
        let jobs: [Job]
        do {
            jobs = (try store.unindexedMeditations().map(Job.index) + (try store.uncountedSounds()).map(Job.length))
                .filter { !tried.contains($0.key) }
        } catch {
            log.warning("older meditations and sounds cannot be looked at: \(error.description); again in 10 minutes")
            let later = MonotonicClock.seconds() + 600
            state.withLock { $0.notBefore = later }
            return
        }
        for job in jobs {
            // Stopped between files once a session starts; each file tried once.
            let go = state.withLock { s -> Bool in
                guard !s.stop else { return false }
                s.tried.insert(job.key)
                return true
            }
            guard go else { return }
            do {
                switch job {
                case .index(let m): if try store.storeIndex(of: m) { storedNow += 1 }
                case .length(let sound): if try store.storeLength(of: sound) { countedNow += 1 }
                }
            } catch {
                log.warning("\(job.what) cannot be stored: \(error.description)")
            }
        }
        complete = true
    }
}
