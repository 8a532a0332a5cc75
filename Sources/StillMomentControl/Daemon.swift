// The daemon: owns the sound device, serves the control socket, and decides who may stay connected.
import CSystem
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import StillMomentAudio
import StillMomentCore
import Synchronization

/// The daemon: one process that owns the sound device, plays one session at a time and
/// serves the control socket. One thread runs a poll loop over the listening socket and
/// the clients; the audio runs on the engine's own threads, so a slow or hostile client
/// can delay an answer but never the sound.
public final class Daemon {
    public struct Options: Sendable {
        /// Started by a client (not by systemd): exits after `idleExit` seconds with no session.
        public var onDemand: Bool
        public var idleExit: Double
        /// A client must say hello within this many seconds.
        public var helloTimeout: Double = 5
        public var maxClients: Int = 128
        /// A client that reads nothing is dropped once this much waits for it.
        public var maxBacklog: Int = 256 * 1024
        /// A connection that neither asks nor listens (no subscription) is closed after this.
        public var idleTimeout: Double = 300
        /// Idle this long, it stores the frame index of older MP3 meditations and the length
        /// of older imported sounds (BackgroundIndexer).
        public var indexAfterIdle: Double = 10

        public init(onDemand: Bool, idleExit: Double = 600) {
            self.onDemand = onDemand
            self.idleExit = idleExit
        }
    }

    private final class Client {
        let fd: Int32
        let pid: pid_t
        let connectedAt: Double
        var framer = LineFramer()
        var helloDone = false
        var subscribed = false
        var progress = false
        /// The language its user reads (from the hello): the daemon answers in it.
        var language: Language?
        var out: [UInt8] = []
        var drop = false
        var closeWhenFlushed = false
        /// The client shut its side: nothing more to read, answers still to deliver.
        var eof = false
        /// When it last sent a message (or connected): stray bytes and blank lines do not count.
        var lastActive: Double

        init(fd: Int32, pid: pid_t, connectedAt: Double) {
            self.fd = fd
            self.pid = pid
            self.connectedAt = connectedAt
            lastActive = connectedAt
        }
    }

    private let options: Options
    private let log: Logger
    private let host: SessionService
    private let indexer: BackgroundIndexer
    private var listenFD: Int32
    private var lockFD: Int32
    private let socketPath: String
    /// The socket file we bound (device, inode): only that one is ours to remove.
    private var socketID: (dev_t, ino_t)
    private var clients: [Client] = []
    /// Out of file descriptors: accept nothing for a moment rather than spin on the listener.
    private var acceptPausedUntil = 0.0
    private let stopSignal = StopFlag()
    // Connection policy (idle clients must never lock others out):
    // - a connection must say hello within `helloTimeout` (5 s), or it is closed;
    // - one that has said hello but neither asks (no message) nor listens (no
    //   subscription) for `options.idleTimeout` (5 min) is closed, with a `busy` error saying why;
    // - when all `maxClients` (128) slots are taken, a new connection is still accepted
    //   if one of them has been silent for `evictableAfter` (10 s) at least: the one
    //   silent longest without a subscription is closed to make room, and only if every
    //   silent one is subscribed (a live view) the one silent longest of those. Only when
    //   all are busier than that is the newcomer refused with `busy`.
    /// A connection silent this long may be closed to make room when the daemon is full.
    static let evictableAfter = 10.0

    /// Takes the daemon lock and the socket (replacing a stale one), and opens the store.
    /// Throws `.refused(code: "running", …)` when another daemon holds the lock.
    public init(options: Options, log: Logger) throws(ControlError) {
        self.options = options
        self.log = log
        try ControlPaths.prepareFolder()
        socketPath = ControlPaths.socket
        let (fd, listening, id) = try Self.takeSocket(socketPath, log: log)
        lockFD = fd
        listenFD = listening
        socketID = id
        do {
            let store = try LibraryStore()
            host = SessionService(store: store, log: log)
            indexer = BackgroundIndexer(store: store, log: log)
        } catch {
            close(listening)
            unlink(socketPath)
            close(fd)
            throw ControlError.io(error.description)
        }
    }

    deinit {
        indexer.halt()
        for c in clients { close(c.fd) }
        close(listenFD)
        if ownsSocket { unlink(socketPath) }    // never another daemon's
        close(lockFD)
    }

    /// Takes the daemon lock (its file must still be the one at its path: a folder cleared
    /// under us is no lock) and binds the socket, replacing one left by a dead daemon.
    private static func takeSocket(_ socketPath: String, log: Logger) throws(ControlError) -> (Int32, Int32, (dev_t, ino_t)) {
        let lockPath = ControlPaths.lock
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ControlError.io("cannot open \(lockPath): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            var buf = [UInt8](repeating: 0, count: 32)
            let n = pread(fd, &buf, buf.count, 0)
            close(fd)
            let pid = n > 0 ? String(decoding: buf[0..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : "?"
            throw ControlError.alreadyRunning(pid: pid)
        }
        var held = stat(), named = stat()
        guard fstat(fd, &held) == 0, stat(lockPath, &named) == 0, held.st_ino == named.st_ino, held.st_dev == named.st_dev else {
            close(fd)
            throw ControlError.io("\(lockPath) changed while the daemon started; start it again")
        }
        let pidText = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pwrite(fd, pidText, pidText.count, 0)
        // We hold the lock, so a socket left here belongs to a daemon that died.
        var st = stat()
        if lstat(socketPath, &st) == 0 {
            unlink(socketPath)
            log.notice("replaced a stale socket at \(socketPath)")
        }
        let listening = sm_unix_listen(socketPath, 64)
        guard listening >= 0 else {
            close(fd)
            throw ControlError.io("cannot listen on \(socketPath): \(String(cString: strerror(-listening)))")
        }
        guard lstat(socketPath, &st) == 0 else {
            close(listening)
            close(fd)
            throw ControlError.io("cannot find the socket just made at \(socketPath)")
        }
        do { try ControlPaths.shareWithGroup(socketPath) } catch {
            close(listening)
            close(fd)
            throw error
        }
        return (fd, listening, (st.st_dev, st.st_ino))
    }

    /// Whether the socket at our path is still the one we bound.
    private var ownsSocket: Bool {
        var st = stat()
        return lstat(socketPath, &st) == 0 && st.st_dev == socketID.0 && st.st_ino == socketID.1
    }

    /// The runtime folder was cleared under us (logind removes /run/user/UID at the last
    /// logout): listen again, so that clients find the session still playing.
    private func listenAgain() -> Bool {
        do {
            try ControlPaths.prepareFolder()
            let (fd, listening, id) = try Self.takeSocket(socketPath, log: log)
            close(listenFD)
            close(lockFD)
            lockFD = fd
            listenFD = listening
            socketID = id
            log.notice("the control socket was removed; listening again on \(socketPath)")
            return true
        } catch {
            log.error("the control socket was removed and cannot be made again: \(error.description)")
            return false
        }
    }

    /// Serves until SIGTERM/SIGINT (the session fades out over 1 s and the device is
    /// released) or, when started on demand, until no session played for `idleExit`.
    public func run() {
        signal(SIGPIPE, SIG_IGN)
        signal(SIGHUP, SIG_IGN)
        // A signal wakes the loop at once, however long it would sleep (5 s when idle).
        let worker = host.worker
        stopSignal.install([SIGTERM, SIGINT]) { worker.poke() }
        log.info("listening on \(socketPath) (pid \(getpid()), \(options.onDemand ? "started on demand" : "service"))")
        // The device's configuration and libraries, loaded while nothing waits for them
        // (a settings file that cannot be read is the first session's to report).
        if let settings = try? Settings.load(), let device = try? DeviceName.setting(settings) { DeviceWarmup.begin(device: device) }
        while step() {}
        indexer.halt()
        host.shutdown()      // an idle exit: a device kept open is closed (again harmless after a signal)
        DeviceWarmup.finish()   // a signal in the first moments: not exiting with a thread inside alsa-lib
    }

    /// The loop's state between steps.
    private var idleSince = 0.0
    private var lastCheck = 0.0
    private var reachable = true
    private var started = false
    /// Since when no session plays, and whether the code pages were released since.
    private var sessionIdleSince = 0.0
    private var codeReleased = false
    /// The session playing, since when, and whether its start-up's code pages were released.
    private var playing: (id: Int, since: Double, released: Bool)?

    /// One turn of the loop: waits (at most `cap` ms, less when something is due) for
    /// the sockets and the device worker, serves what came, ticks the service, and
    /// applies the connection policy. False once the daemon should exit. (`run` turns it
    /// until then; tests turn it themselves.)
    func step(cap: Int32? = nil) -> Bool {
        if !started {
            started = true
            idleSince = now()
            lastCheck = now()
            sessionIdleSince = now()
        }
        if let sig = stopSignal.received {
            log.info("signal \(sig): ending")
            host.shutdown()
            broadcast(host.takeEvents())
            flushAll()
            return false
        }
        // Idle with nobody connected, the loop sleeps until the socket watchdog's next
        // look (5 s) or the next scheduled entry, whichever comes first.
        let sleep: Int32 = host.isIdle ? (clients.isEmpty ? 5000 : 250) : 100
        pollOnce(timeoutMs: host.pollTimeout(cap: min(sleep, cap ?? sleep)))
        host.tick()
        broadcast(host.takeEvents())
        let t = now()
        if t - lastCheck >= 5 {
            lastCheck = t
            if reachable && !ownsSocket {
                reachable = listenAgain()
            }
            if !reachable && host.isIdle {
                log.info("unreachable and nothing playing: exiting")
                return false
            }
        }
        // Idle for 2 s: what start-up and the last session touched of the code is released;
        // and 3 s into each session, what its start touched (the catalog, the decoder's
        // opening, the plan): playing runs far less code than starting.
        if host.isIdle {
            if !codeReleased && t - sessionIdleSince >= 2 {
                CodePages.release()
                codeReleased = true
            }
        } else {
            sessionIdleSince = t
            codeReleased = false
        }
        // Idle a while: older MP3s get their frame index, until a session starts; what it
        // touched is released again once it ends.
        if host.isIdle && t - sessionIdleSince >= options.indexAfterIdle {
            indexer.start()
        } else if !host.isIdle {
            indexer.pause()
        }
        if indexer.takeEnded() { codeReleased = false }
        if let id = host.activeSession {
            if playing?.id != id { playing = (id, t, false) }
            if let p = playing, !p.released, t - p.since >= 3 {
                CodePages.release()
                playing?.released = true
            }
        } else {
            playing = nil
        }
        // A client that is connected may be about to start a session: not idle.
        if !host.isIdle || !clients.isEmpty {
            idleSince = t
        }
        for c in clients where c.helloDone && !c.subscribed && !c.drop && !c.closeWhenFlushed && t - c.lastActive > options.idleTimeout {
            send(c, ProtocolError(.busy, Language.speaking(c.language) { tr("closed: idle for \(Int(options.idleTimeout)) s", "geschlossen: \(Int(options.idleTimeout)) s untätig") }).answer)
            c.closeWhenFlushed = true
        }
        for c in clients where !c.helloDone && !c.drop && !c.closeWhenFlushed && t - c.connectedAt > options.helloTimeout {
            send(c, ProtocolError(.notHello, tr("no hello within \(Self.seconds(options.helloTimeout)) s; closing", "kein Hallo binnen \(Self.seconds(options.helloTimeout)) s; die Verbindung wird geschlossen")).answer)
            c.closeWhenFlushed = true
        }
        reapClients()
        // A daemon that keeps a schedule does not exit when idle.
        if options.onDemand, host.isIdle, !host.keepsTime, t - idleSince > options.idleExit {
            log.info("no session for \(Int(options.idleExit)) s: exiting")
            flushAll()
            return false
        }
        return true
    }

    /// Serves a connection made elsewhere (a socketpair in the tests) as if accepted.
    func adopt(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        clients.append(Client(fd: fd, pid: getpid(), connectedAt: now()))
    }

    /// "5" for 5 s, "0.2" for 200 ms.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String((value * 1000).rounded() / 1000)
    }

    /// The connections served now.
    var clientCount: Int { clients.count }

    /// The background indexer's state: running, done, how many indexes and sound lengths it stored.
    var indexing: (running: Bool, finished: Bool, stored: Int, counted: Int) {
        (indexer.isRunning, indexer.isFinished, indexer.stored, indexer.counted)
    }

    // MARK: the loop

    private func pollOnce(timeoutMs: Int32) {
        let listening = now() >= acceptPausedUntil
        // The device worker's wake-up comes last: its completions are taken in by the tick.
        var fds = [pollfd(fd: listenFD, events: listening ? Int16(POLLIN) : 0, revents: 0)]
        for c in clients {
            let events = (c.eof ? 0 : Int16(POLLIN)) | (c.out.isEmpty ? 0 : Int16(POLLOUT))
            fds.append(pollfd(fd: c.fd, events: events, revents: 0))
        }
        fds.append(pollfd(fd: host.wakeFD, events: Int16(POLLIN), revents: 0))
        let n = poll(&fds, nfds_t(fds.count), timeoutMs)
        guard n > 0 else { return }
        // What came in came by now (a relative seek counts from here).
        let arrived = MonotonicClock.nanoseconds()
        let current = clients
        for (i, c) in current.enumerated() {
            let revents = fds[i + 1].revents
            if revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { readFrom(c, arrived: arrived) }
            if revents & Int16(POLLOUT) != 0 { flush(c) }
        }
        // Clients that just hung up leave before new ones are counted against the limit.
        reapClients()
        if fds[0].revents & Int16(POLLIN) != 0 { acceptAll() }
    }

    private func acceptAll() {
        while true {
            let fd = sm_unix_accept(listenFD)
            if fd < 0 {
                if -fd == EMFILE || -fd == ENFILE {
                    log.error("accept: \(String(cString: strerror(-fd))); accepting nothing for a second")
                    acceptPausedUntil = now() + 1
                } else if -fd != EAGAIN && -fd != EINTR && -fd != ECONNABORTED {
                    log.error("accept: \(String(cString: strerror(-fd)))")
                }
                return
            }
            var uid: uid_t = 0
            var pid: pid_t = 0
            var gid: gid_t = gid_t.max
            let group = try? ControlPaths.controlGroup()
            if sm_peer_credentials(fd, &uid, &pid) != 0 || sm_peer_gid(fd, &gid) != 0
                || !ControlPaths.mayControl(uid: uid, gid: gid, group: group) {
                log.warning("refused a connection from uid \(uid) (pid \(pid)): not our user\(group == nil ? "" : " nor in the control group")")
                refuse(fd, ProtocolError(.forbidden, tr("this daemon serves only its own user (uid \(geteuid()))", "dieser Daemon bedient nur seinen eigenen Benutzer (uid \(geteuid()))")))
                continue
            }
            // Full: room is made by closing the connection silent longest (the policy above).
            if clients.count >= options.maxClients {
                let t = now()
                let silent = clients.filter { !$0.drop && !$0.closeWhenFlushed && t - $0.lastActive >= Self.evictableAfter }
                let idlest = silent.filter { !$0.subscribed }.min { $0.lastActive < $1.lastActive }
                    ?? silent.min { $0.lastActive < $1.lastActive }
                if let idlest {
                    log.notice("full: closing the connection of pid \(idlest.pid), idle \(Int(t - idlest.lastActive)) s")
                    send(idlest, ProtocolError(.busy, Language.speaking(idlest.language) { tr("closed: idle while the daemon was full", "geschlossen: untätig, während der Daemon voll war") }).answer)
                    flush(idlest)
                    idlest.drop = true
                    reapClients()
                }
            }
            if clients.count >= options.maxClients {
                log.warning("refused a connection from pid \(pid): \(clients.count) clients already")
                refuse(fd, ProtocolError(.busy, tr("too many clients (\(options.maxClients)); try again later", "zu viele Verbindungen (\(options.maxClients)); versuche es später noch einmal")))
                continue
            }
            clients.append(Client(fd: fd, pid: pid, connectedAt: now()))
        }
    }

    /// Says why (best effort, never blocking) and closes.
    private func refuse(_ fd: Int32, _ error: ProtocolError) {
        let line = Array((error.answer.line + "\n").utf8)
        _ = line.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        close(fd)
    }

    private func readFrom(_ c: Client, arrived: UInt64) {
        guard !c.drop else { return }
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        let n = read(c.fd, &buffer, buffer.count)
        if n == 0 {
            // Shut for writing (`printf … | socat`): deliver what is queued, then close.
            c.eof = true
            c.closeWhenFlushed = true
            return
        }
        if n < 0 && errno != EAGAIN && errno != EINTR {
            c.drop = true
            return
        }
        guard n > 0 else { return }
        for item in c.framer.feed(buffer[0..<n]) {
            if c.drop || c.closeWhenFlushed { break }
            switch item {
            case .tooLong:
                send(c, ProtocolError(.tooLong, Language.speaking(c.language) { tr("a message is limited to \(ControlProtocol.maxMessageBytes) bytes", "eine Nachricht hat höchstens \(ControlProtocol.maxMessageBytes) Bytes") }).answer)
            case .line(let line):
                if line.isEmpty { continue }
                c.lastActive = now()
                handle(line, from: c, arrived: arrived)
            }
        }
    }

    private func handle(_ line: [UInt8], from c: Client, arrived: UInt64) {
        let message: ClientMessage
        do {
            message = try Language.speaking(c.language) { () throws(ProtocolError) -> ClientMessage in
                try ClientMessage.decode(line, helloDone: c.helloDone)
            }
        } catch {
            send(c, error.answer)
            if error.code == .badVersion { c.closeWhenFlushed = true }
            return
        }
        switch message {
        case .hello(let version, _, let language):
            c.helloDone = true
            c.language = language
            send(c, .object(["hello": .object([
                "version": .number(Double(version)), "daemon": .string("stillmoment"),
                "pid": .number(Double(getpid())), "home": .string(host.store.home),
            ])]))
        case .request(let id, let command, let args):
            // Subscriptions belong to the connection; everything else to the session host.
            // The answer, its errors included, in the language of the client's user.
            Language.speaking(c.language) {
                do throws(ProtocolError) {
                    let result = try host.answer(command, args, receivedAt: arrived)
                    if command == .subscribe || command == .unsubscribe {
                        c.subscribed = command == .subscribe
                        c.progress = c.subscribed && args["progress"] != .bool(false)
                    }
                    send(c, .object(["id": .number(Double(id)), "result": result]))
                } catch {
                    send(c, ProtocolError(error.code, error.message, id: id).answer)
                }
            }
        }
        // The changes this request made reach subscribers now, after its answer and
        // before anything a later request does.
        broadcast(host.takeEvents())
    }

    // MARK: writing

    /// Sends events to the subscribers (progress only to those that asked for it).
    private func broadcast(_ events: [Event]) {
        for e in events {
            let line = JSON(encoding: e)
            let progress = if case .progress = e { true } else { false }
            for c in clients where c.subscribed && (!progress || c.progress) { send(c, line) }
        }
    }

    private func send(_ c: Client, _ message: JSON) {
        guard !c.drop else { return }
        c.out.append(contentsOf: message.line.utf8)
        c.out.append(0x0A)
        flush(c)
        if c.out.count > options.maxBacklog {
            log.warning("dropped client pid \(c.pid): it reads nothing (\(c.out.count) bytes waiting)")
            c.drop = true
        }
    }

    private func flush(_ c: Client) {
        while !c.out.isEmpty && !c.drop {
            let n = c.out.withUnsafeBytes { Glibc.send(c.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if n > 0 {
                c.out.removeFirst(n)
            } else if n < 0 && (errno == EAGAIN || errno == EINTR) {
                return
            } else {
                c.drop = true
            }
        }
    }

    private func flushAll() {
        for c in clients { flush(c) }
    }

    private func reapClients() {
        clients.removeAll { c in
            if c.drop || (c.closeWhenFlushed && c.out.isEmpty) {
                close(c.fd)
                return true
            }
            return false
        }
    }

    private func now() -> Double { MonotonicClock.seconds() }
}

/// Signals become a flag that a loop reads (the daemon's within 100–250 ms, a client's
/// view within 100 ms): the default action, dying on the spot, is turned off for them.
public final class StopFlag {
    private final class Box: Sendable { let value = Atomic<Int32>(0) }
    private let box = Box()
    private var sources: [DispatchSourceSignal] = []

    public init(_ signals: [Int32] = []) { install(signals) }

    /// `wake` runs after the flag is set (the daemon's loop is woken from its poll by it).
    public func install(_ signals: [Int32], wake: @escaping @Sendable () -> Void = {}) {
        for sig in signals {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            let box = self.box
            source.setEventHandler {
                box.value.store(sig, ordering: .releasing)
                wake()
            }
            source.resume()
            sources.append(source)
        }
    }

    /// The signal received, if any.
    public var received: Int32? {
        let s = box.value.load(ordering: .acquiring)
        return s == 0 ? nil : s
    }
}
