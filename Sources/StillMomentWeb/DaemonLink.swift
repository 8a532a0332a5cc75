// The web app's one connection to the daemon, kept by a thread of its own: the requests of
// every browser multiplexed over it (each matched to its answer by id, many in flight, each
// with its own deadline), the daemon's events fanned out to every event stream from its one
// subscription, and a reconnect with backoff when the daemon goes away or restarts. The
// HTTP thread only hands requests over and takes answers and events back (through `notify`):
// a slow, held or restarting daemon delays those answers, never a page. Unused (no event
// stream, nothing asked for `linger` s) the link closes, so that an on-demand daemon may exit
// and an idle web app wakes for nothing. The loop itself is DaemonLinkLoop.swift.
import Glibc
import Logging
import StillMomentControl
import StillMomentCore
import Synchronization

final class DaemonLink: Sendable {
    /// How the link stands, for an answer that cannot wait for the daemon.
    enum Health: Sendable, Equatable {
        /// No connection and no need of one.
        case idle
        /// Connected (a held daemon still counts: its answers are late, not refused).
        case connected
        /// Reaching the daemon (its hello not yet answered).
        case connecting
        /// Starting a daemon on demand for a request that needs one.
        case starting
        /// No daemon answered the last try.
        case absent
    }

    typealias Reply = @Sendable (Result<JSON, ControlError>) -> Void
    /// Reaches the daemon (starting it when `start`) and says hello, on the link's thread
    /// (which it may block): the connected socket, the link's from then on.
    typealias Connector = @Sendable (_ start: Bool) throws(ControlError) -> Int32

    /// A request handed to the link: answered exactly once, by its deadline at the latest.
    struct Ask: Sendable {
        var request: Request
        /// Whether a daemon is started for it when none runs.
        var start: Bool
        /// When the HTTP thread handed it over (monotonic seconds): how long its browser has waited.
        var asked: Double
        /// Monotonic seconds.
        var deadline: Double
        var reply: Reply
    }

    /// What the HTTP thread and the link's thread share.
    struct Shared: Sendable {
        var asks: [Ask] = []
        var watching = false
        var events: [JSON] = []
        var health = Health.idle
        var threadRunning = false
        var stopping = false
        /// Connections made so far (the tests count them).
        var connections = 0
        /// When the oldest status request still unanswered was sent (monotonic seconds).
        var oldestStatus: Double?
        /// Since when the link is reaching (or starting) the daemon.
        var connectingSince: Double?
    }

    let shared = Mutex(Shared())
    let wakeRead: Int32
    let wakeWrite: Int32
    let connector: Connector
    let log: Logger
    /// Called (on the link's thread) when events came for `takeEvents`.
    let notify: @Sendable () -> Void
    /// Seconds a connection nobody uses is kept.
    let linger: Double

    init(log: Logger, linger: Double = 5, connector: @escaping Connector = DaemonLink.daemon, notify: @escaping @Sendable () -> Void) {
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) == 0 {
            for fd in fds {
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            }
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        self.log = log
        self.linger = linger
        self.connector = connector
        self.notify = notify
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    // MARK: the HTTP thread's side (none of it waits)

    /// Sends `command` to the daemon; `reply` gets its answer (or why there is none) on the
    /// link's thread within `timeout` seconds. Every request goes through here, so that it
    /// takes one line to send a typed request instead.
    /// `asked`: when the browser asked (DaemonLinkLoop.now()), if earlier than now: the HTTP
    /// server's moment, from which it counts the browser's patience too.
    func send(_ request: Request, start: Bool = false, timeout: Double = 5, asked: Double? = nil, reply: @escaping Reply) {
        let now = DaemonLinkLoop.now()
        let ask = Ask(request: request, start: start, asked: min(asked ?? now, now), deadline: now + timeout, reply: reply)
        let startThread = shared.withLock { s -> Bool in
            s.asks.append(ask)
            defer { s.threadRunning = true }
            return !s.threadRunning
        }
        wake(startThread)
    }

    /// Whether event streams are open: the link subscribes while one is, and unsubscribes
    /// (then closes, once unused) when the last one goes.
    func watch(_ on: Bool) {
        let (changed, startThread) = shared.withLock { s -> (Bool, Bool) in
            guard s.watching != on else { return (false, false) }
            s.watching = on
            defer { if on { s.threadRunning = true } }
            return (true, on && !s.threadRunning)
        }
        if changed { wake(startThread) }
    }

    /// The events that came since the last call, in order.
    func takeEvents() -> [JSON] {
        shared.withLock { s in
            defer { s.events.removeAll() }
            return s.events
        }
    }

    var health: Health { shared.withLock { $0.health } }

    /// Whether the daemon is known not to answer now: a status request (answered at once by a
    /// daemon that runs) has waited on it for `patience` s already, or the link is still
    /// reaching or starting it. The status is then answered at once, without joining the queue.
    func stalled(patience: Double) -> Bool {
        let now = DaemonLinkLoop.now()
        return shared.withLock { s in
            guard let since = [s.oldestStatus, s.connectingSince].compactMap({ $0 }).min() else { return false }
            return now - since >= patience
        }
    }

    /// How many connections to the daemon the link has made.
    var connectionCount: Int { shared.withLock { $0.connections } }

    /// Ends the link's thread (its requests answered as lost) and closes its connection.
    func stop() {
        shared.withLock { $0.stopping = true }
        wake(false)
    }

    private func wake(_ startThread: Bool) {
        if startThread {
            let loop = DaemonLinkLoop(link: self)
            if !BackgroundThread.run({ loop.run() }) {
                log.error("no thread for the daemon link: the daemon is not reachable from the web app")
                shared.withLock { $0.threadRunning = false }
            }
        }
        var b: UInt8 = 1
        _ = write(wakeWrite, &b, 1)
    }

    // MARK: the connection to the real daemon

    /// The daemon at its socket (ControlClient's checks of folder, owner and peer, its
    /// start on demand and its hello), the socket then the link's own.
    static let daemon: Connector = { start throws(ControlError) -> Int32 in
        let client = try ControlClient.connect(startIfNeeded: start, helloTimeoutMs: 3000)
        let fd = fcntl(client.descriptor, F_DUPFD_CLOEXEC, 0)
        guard fd >= 0 else { throw ControlError.io("cannot keep the daemon's connection: \(String(cString: strerror(errno)))") }
        return fd
    }

    /// A daemon's error answer as the client's error (as ControlClient reads it; written here
    /// because its helper is not public).
    static func refusal(_ error: JSON) -> ControlError { ControlError.refusal(error) }
}
