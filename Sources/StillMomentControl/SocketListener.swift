// The daemon's control-socket listener: it accepts connections (peer credentials checked),
// reads newline-delimited JSON, hands each request to the session service, writes answers
// and events back, and keeps the connection policy. It knows nothing of the process (the
// lock, signals, idle exit, housekeeping: Daemon.swift) and never waits: every socket is
// non-blocking and each client's backlog is bounded.
import CSystem
import Glibc
import Logging
import StillMomentAudio
import StillMomentCore

final class SocketListener {
    private final class Client {
        let fd: Int32
        let pid: pid_t
        let connectedAt: Double
        var framer = LineFramer()
        var helloDone = false
        /// The language its answers are worded in: the one its hello named, else the daemon's.
        var speaks: Language { language ?? Language.current }
        /// The protocol version the hello agreed.
        var version = ControlProtocol.version
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

    private let options: Daemon.Options
    private let log: Logger
    private let host: SessionService
    /// The listening socket (the daemon makes it again when its folder was cleared).
    var listenFD: Int32
    private var clients: [Client] = []
    /// Out of file descriptors: accept nothing for a moment rather than spin on the listener.
    private var acceptPausedUntil = 0.0

    /// Sees every event as it goes out (the daemon's LED follows the state).
    var observe: (([Event]) -> Void)?

    init(listenFD: Int32, options: Daemon.Options, host: SessionService, log: Logger) {
        self.listenFD = listenFD
        self.options = options
        self.host = host
        self.log = log
    }

    /// Stops serving: every connection is closed (the listening socket is the daemon's).
    func stop() {
        flushAll()
        for c in clients { close(c.fd) }
        clients.removeAll()
    }

    /// Nobody is connected (an on-demand daemon may then exit when idle).
    var isEmpty: Bool { clients.isEmpty }
    /// Someone reads the events (a CLI in the foreground, the web app's link).
    var hasSubscribers: Bool { clients.contains { $0.subscribed } }

    /// Serves a connection made elsewhere (a socketpair in the tests) as if accepted.
    func adopt(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        clients.append(Client(fd: fd, pid: getpid(), connectedAt: now()))
    }

    /// The connections served now.
    var clientCount: Int { clients.count }

    // MARK: one turn of the daemon's loop

    /// What to poll: the listening socket (unless accepting is paused), then each client.
    func pollDescriptors() -> [pollfd] {
        let listening = now() >= acceptPausedUntil
        var fds = [pollfd(fd: listenFD, events: listening ? Int16(POLLIN) : 0, revents: 0)]
        for c in clients {
            let events = (c.eof ? 0 : Int16(POLLIN)) | (c.out.isEmpty ? 0 : Int16(POLLOUT))
            fds.append(pollfd(fd: c.fd, events: events, revents: 0))
        }
        return fds
    }

    /// Serves what `poll` found on the descriptors `pollDescriptors` gave (in that order);
    /// `arrived` is when (a relative seek counts from there).
    func serve(_ fds: ArraySlice<pollfd>, arrived: UInt64) {
        let current = clients
        let base = fds.startIndex
        for (i, c) in current.enumerated() where base + 1 + i < fds.endIndex {
            let revents = fds[base + 1 + i].revents
            if revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { readFrom(c, arrived: arrived) }
            if revents & Int16(POLLOUT) != 0 { flush(c) }
        }
        // Clients that just hung up leave before new ones are counted against the limit.
        reapClients()
        if fds[base].revents & Int16(POLLIN) != 0 { acceptAll() }
    }

    /// The connection policy's timers: a connection without a hello, or idle too long, is closed.
    func enforcePolicy() {
        let t = now()
        for c in clients where c.helloDone && !c.subscribed && !c.drop && !c.closeWhenFlushed && t - c.lastActive > options.idleTimeout {
            send(c, ProtocolError(.busy, both("closed: idle for \(Int(options.idleTimeout)) s", "geschlossen: \(Int(options.idleTimeout)) s untätig")).answer(c.speaks))
            c.closeWhenFlushed = true
        }
        for c in clients where !c.helloDone && !c.drop && !c.closeWhenFlushed && t - c.connectedAt > options.helloTimeout {
            send(c, ProtocolError(.notHello, both("no hello within \(Daemon.seconds(options.helloTimeout)) s; closing", "kein Hallo binnen \(Daemon.seconds(options.helloTimeout)) s; die Verbindung wird geschlossen")).answer(c.speaks))
            c.closeWhenFlushed = true
        }
        reapClients()
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
                refuse(fd, ProtocolError(.forbidden, both("this daemon serves only its own user (uid \(geteuid()))", "dieser Daemon bedient nur seinen eigenen Benutzer (uid \(geteuid()))")))
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
                    send(idlest, ProtocolError(.busy, both("closed: idle while the daemon was full", "geschlossen: untätig, während der Daemon voll war")).answer(idlest.speaks))
                    flush(idlest)
                    idlest.drop = true
                    reapClients()
                }
            }
            if clients.count >= options.maxClients {
                log.warning("refused a connection from pid \(pid): \(clients.count) clients already")
                refuse(fd, ProtocolError(.busy, both("too many clients (\(options.maxClients)); try again later", "zu viele Verbindungen (\(options.maxClients)); versuche es später noch einmal")))
                continue
            }
            clients.append(Client(fd: fd, pid: pid, connectedAt: now()))
        }
    }

    /// Says why (best effort, never blocking) and closes.
    private func refuse(_ fd: Int32, _ error: ProtocolError) {
        let line = Array((error.answer(.current).line + "\n").utf8)
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
                send(c, ProtocolError(.tooLong, both("a message is limited to \(ControlProtocol.maxMessageBytes) bytes", "eine Nachricht hat höchstens \(ControlProtocol.maxMessageBytes) Bytes")).answer(c.speaks))
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
            message = try ClientMessage.decode(line, helloDone: c.helloDone, version: c.version)
        } catch {
            send(c, error.answer(c.speaks))
            if error.code == .badVersion { c.closeWhenFlushed = true }
            return
        }
        switch message {
        case .hello(let version, _, let language):
            c.helloDone = true
            c.version = version
            c.language = language
            send(c, .object(["hello": .object([
                "version": .number(Double(version)), "daemon": .string("stillmoment"),
                "pid": .number(Double(getpid())), "home": .string(host.store.home),
            ])]))
        case .request(let id, let command, let args):
            // Subscriptions belong to the connection; everything else to the session host.
            // The answer, its errors included, is worded in the language of the client's
            // user only here, as it is written.
            do throws(ProtocolError) {
                let request = try Request(command, args: args)
                let result = try host.call(request, receivedAt: arrived)
                switch request {
                case .subscribe(let progress):
                    c.subscribed = true
                    c.progress = progress
                case .unsubscribe:
                    c.subscribed = false
                    c.progress = false
                default: break
                }
                send(c, .object(["id": .number(Double(id)), "result": JSON(encoding: result, in: c.speaks)]))
            } catch {
                send(c, error.answering(id).answer(c.speaks))
            }
        }
        // The changes this request made reach subscribers now, after its answer and
        // before anything a later request does.
        broadcast(host.takeEvents())
    }

    // MARK: writing

    /// Sends events to the subscribers (progress only to those that asked for it).
    func broadcast(_ events: [Event]) {
        if !events.isEmpty { observe?(events) }
        for e in events {
            let progress = if case .progress = e { true } else { false }
            let to = clients.filter { $0.subscribed && (!progress || $0.progress) }
            // Written once for all the subscribers that read one language.
            var lines: [Language: [UInt8]] = [:]
            for c in to {
                let language = c.speaks
                let line = lines[language] ?? JSONWriter.bytes(JSON(encoding: e, in: language))
                lines[language] = line
                send(c, line: line)
            }
        }
    }

    private func send(_ c: Client, _ message: JSON) { send(c, line: JSONWriter.bytes(message)) }

    private func send(_ c: Client, line: [UInt8]) {
        guard !c.drop else { return }
        c.out.append(contentsOf: line)
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

    func flushAll() {
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
