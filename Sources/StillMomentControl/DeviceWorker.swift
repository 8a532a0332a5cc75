// The service's one thread for work that waits on the sound device: opening a session,
// fading one out and closing it, pause, resume and seek. The service's callers never wait
// for it: they queue work here, and the results come back through a mailbox that wakes
// the listener's poll loop (an eventfd).
import Dispatch
import Glibc
import StillMomentAudio
import StillMomentCore
import Synchronization

final class DeviceWorker: Sendable {
    /// What finished on the worker, for the service to take in on its own thread.
    enum Completion: Sendable {
        case started(HostedSession)
        case failedToStart(id: Int, kind: SessionKind, message: LocalizedText, device: Bool)
        /// A start that a later start or a stop made moot before it opened the device.
        case superseded(id: Int, kind: SessionKind)
        case closed(HostedSession, SessionRecordSummary)
        case done
    }

    private let queue = DispatchQueue(label: "stillmoment.device")
    private let mailbox = Mutex<[Completion]>([])
    private let pending = Atomic<Int>(0)
    /// Readable while completions wait (poll it beside the sockets): a pipe's read end.
    let wakeFD: Int32
    private let pokeFD: Int32

    init() {
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) == 0 {
            for fd in fds {
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            }
        } else {
            fds = [-1, -1]
        }
        wakeFD = fds[0]
        pokeFD = fds[1]
    }

    deinit {
        if wakeFD >= 0 { close(wakeFD) }
        if pokeFD >= 0 { close(pokeFD) }
    }

    /// How long each kind of work took at most, and how often (for the log and tests).
    let slowest = Mutex<[String: (count: Int, maxMs: Double)]>([:])

    /// Queues `work` (named for the log); its completion (if any) is delivered through the mailbox.
    func run(_ name: String, _ work: @escaping @Sendable () -> Completion?) {
        pending.add(1, ordering: .relaxed)
        queue.async { [self] in
            let t0 = MonotonicClock.nanoseconds()
            let completion = work()
            let ms = Double(MonotonicClock.nanoseconds() - t0) / 1e6
            slowest.withLock { $0[name] = (($0[name]?.count ?? 0) + 1, max($0[name]?.maxMs ?? 0, ms)) }
            if ms > 200 { FileHandleLog.write("stillmoment: device work '\(name)' took \(Int(ms)) ms") }
            pending.subtract(1, ordering: .relaxed)
            mailbox.withLock { $0.append(completion ?? .done) }
            var one: UInt8 = 1
            _ = write(pokeFD, &one, 1)
        }
    }

    /// Wakes whoever polls `wakeFD` (a signal for the daemon's loop).
    func poke() {
        var one: UInt8 = 1
        _ = write(pokeFD, &one, 1)
    }

    /// Whether work is queued or running (a start must then wait its turn).
    var isBusy: Bool { pending.load(ordering: .relaxed) > 0 }

    /// The completions so far (clears the wake-up).
    func take() -> [Completion] {
        var bytes = [UInt8](repeating: 0, count: 256)
        while read(wakeFD, &bytes, bytes.count) > 0 {}
        return mailbox.withLock { list in
            defer { list.removeAll() }
            return list
        }
    }

    /// Waits until everything queued is done (the daemon's exit).
    func drain() { queue.sync {} }
}

/// What a closed session's runner reported, for the `ended` event.
struct SessionRecordSummary: Sendable {
    let reason: EndReason
}

/// A line on standard error from the worker (the daemon's log), without the logger.
enum FileHandleLog {
    static func write(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}

/// Which start is the one wanted, and a session the worker opened that the service has
/// not taken in yet: a later start closes that one before it opens the device (a hw
/// device opens once), and a start no longer wanted does not open it at all.
final class StartSlot: Sendable {
    private let state = Mutex<(wanted: Int, unadopted: HostedSession?)>((0, nil))

    func want(_ id: Int) { state.withLock { $0.wanted = id } }
    func isWanted(_ id: Int) -> Bool { state.withLock { $0.wanted == id } }

    /// On the worker, before opening: the session opened before and not taken in.
    func takeUnadopted() -> HostedSession? {
        state.withLock { s in
            defer { s.unadopted = nil }
            return s.unadopted
        }
    }

    func opened(_ h: HostedSession) { state.withLock { $0.unadopted = h } }

    /// The service took `h` in (to play or to close).
    func adopt(_ h: HostedSession) { state.withLock { if $0.unadopted === h { $0.unadopted = nil } } }
}
