// The daemon link's thread: one poll loop over its wake pipe and its connection. It connects
// when something needs the daemon (a request, an event stream), sends every request with an
// id of its own and answers each from the line that carries that id, times out each request
// by its own deadline, subscribes while streams watch, reconnects with backoff (0.25 s,
// doubling, at most 3 s) while streams watch a daemon that went away, and closes the
// connection once nothing has used it for the link's `linger`.
import Glibc
import Logging
import StillMomentAudio
import StillMomentControl
import StillMomentCore

final class DaemonLinkLoop: @unchecked Sendable {
    // @unchecked: made on the HTTP thread, then used by the link's thread alone.
    private let link: DaemonLink
    private var fd: Int32 = -1
    private var framer = LineFramer(limit: 4 * ControlProtocol.maxMessageBytes)
    /// Requests not yet sent (no connection yet), and those sent, by id.
    private var waiting: [DaemonLink.Ask] = []
    private var inFlight: [Int: (ask: DaemonLink.Ask, sent: Double)] = [:] {
        didSet {
            // Status only: a daemon answers it at once, while a start may take its time. Counted
            // from when the browser asked (not when this thread sent it), so that a browser told
            // "not answering" after its patience is never made to wait it out a second time.
            let oldest = inFlight.values.filter { $0.ask.request == .status }.map(\.ask.asked).min()
            link.shared.withLock { $0.oldestStatus = oldest }
        }
    }
    private var nextID = 1
    /// The id of the subscription's request while it is unanswered; whether it holds.
    private var subscribing: Int?
    private var subscribed = false
    private var watching = false
    private var retryAt = 0.0
    private var backoff = 0.25
    private var lastFailure = ControlError.noDaemon
    private var lastUsed = 0.0

    init(link: DaemonLink) { self.link = link }

    static func now() -> Double { MonotonicClock.seconds() }

    func run() {
        while step() {}
        disconnect(because: .lost("the web app is stopping"))
        for ask in waiting { ask.reply(.failure(.lost("the web app is stopping"))) }
        waiting.removeAll()
        link.shared.withLock { $0.threadRunning = false }
    }

    /// One turn: what the HTTP thread handed over, a connection if one is needed, the
    /// requests sent, then a wait for the daemon or the next deadline. False once stopping.
    private func step() -> Bool {
        let (asks, watch, stopping) = link.shared.withLock { s -> ([DaemonLink.Ask], Bool, Bool) in
            defer { s.asks.removeAll() }
            return (s.asks, s.watching, s.stopping)
        }
        if stopping { return false }
        var now = Self.now()
        if !asks.isEmpty { lastUsed = now }
        waiting += asks
        if watch != watching {
            watching = watch
            lastUsed = now
            if watch { backoff = 0.25 }
        }
        expire(now)
        let needed = !waiting.isEmpty || !inFlight.isEmpty || watching
        if fd < 0 && needed {
            let mustStart = waiting.contains { $0.start }
            if mustStart || now >= retryAt { connect(start: mustStart) }
            now = Self.now()
            if fd < 0 {
                // Not reachable now: what cannot wait for the next try is answered with why.
                for ask in waiting { ask.reply(.failure(lastFailure)) }
                waiting.removeAll()
            }
        }
        if fd >= 0 {
            if watching && !subscribed && subscribing == nil {
                subscribing = transmit(.subscribe(progress: true))
            } else if !watching && subscribed {
                _ = transmit(.unsubscribe)
                subscribed = false
            }
            for ask in waiting {
                if let id = transmit(ask.request) { inFlight[id] = (ask, now) } else { ask.reply(.failure(lastFailure)) }
            }
            waiting.removeAll()
            if !needed && now - lastUsed >= link.linger {
                disconnect(because: nil)
            }
        }
        wait(now)
        return true
    }

    /// Waits for the wake pipe, the daemon, or the next deadline (a request's, a retry's,
    /// an unused connection's close); with none of them, until woken.
    private func wait(_ now: Double) {
        var next = inFlight.values.map(\.ask.deadline)
        if fd < 0 && watching { next.append(retryAt) }
        if fd >= 0 && waiting.isEmpty && inFlight.isEmpty && !watching { next.append(lastUsed + link.linger) }
        var timeout: Int32 = -1
        if let soonest = next.min() { timeout = Int32(max(0, min(60_000, (soonest - now) * 1000 + 2))) }
        var fds = [pollfd(fd: link.wakeRead, events: Int16(POLLIN), revents: 0), pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        let r = poll(&fds, 2, timeout)
        if r < 0 && errno != EINTR { usleep(10_000) }
        if fds[0].revents != 0 {
            var buffer = [UInt8](repeating: 0, count: 64)
            while read(link.wakeRead, &buffer, buffer.count) > 0 {}
        }
        if fd >= 0 && fds[1].revents != 0 { receive() }
    }

    // MARK: the connection

    private func connect(start: Bool) {
        let since = Self.now()
        link.shared.withLock {
            $0.health = start ? .starting : .connecting
            $0.connectingSince = since
        }
        defer { link.shared.withLock { $0.connectingSince = nil } }
        do throws(ControlError) {
            let socket = try link.connector(start)
            _ = fcntl(socket, F_SETFL, fcntl(socket, F_GETFL) | O_NONBLOCK)
            fd = socket
            framer = LineFramer(limit: 4 * ControlProtocol.maxMessageBytes)
            backoff = 0.25
            lastUsed = Self.now()
            link.shared.withLock {
                $0.health = .connected
                $0.connections += 1
            }
            link.log.info("connected to the daemon")
        } catch {
            lastFailure = error
            retryAt = Self.now() + backoff
            backoff = min(3, backoff * 2)
            link.shared.withLock { $0.health = .absent }
        }
    }

    /// Closes the connection; with a reason, every request in flight is answered with it
    /// and the streams hear that the daemon went.
    private func disconnect(because reason: ControlError?) {
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
        let lost = inFlight.values
        inFlight.removeAll()
        subscribing = nil
        let wasSubscribed = subscribed
        subscribed = false
        link.shared.withLock { $0.health = .idle }
        guard let reason else {
            link.log.info("the daemon's connection closed: unused")
            return
        }
        link.log.info("the daemon went away: \(reason.description)")
        lastFailure = reason
        retryAt = Self.now() + backoff
        for (ask, _) in lost { ask.reply(.failure(reason)) }
        if wasSubscribed && watching {
            deliver(.object(["event": .string("state"), "data": JSON(encoding: Status(state: .idle)), "daemon": .bool(false)]))
        }
    }

    /// Sends a request under a new id (nil: the connection failed, and is closed).
    private func transmit(_ request: Request) -> Int? {
        let id = nextID
        nextID += 1
        var message: [String: JSON] = ["id": .number(Double(id)), "command": .string(request.command.rawValue)]
        let args = request.args
        if !args.isEmpty { message["args"] = .object(args) }
        var bytes = ArraySlice(Array((JSON.object(message).line + "\n").utf8))
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                bytes = bytes.dropFirst(n)
            } else if n < 0 && errno == EINTR {
                continue
            } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                // A daemon that reads nothing for a socket's buffer of requests: wait a little, then give up on it.
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                if poll(&p, 1, 1000) <= 0 {
                    disconnect(because: .lost("the daemon reads nothing"))
                    return nil
                }
            } else {
                disconnect(because: .lost("the daemon closed the connection"))
                return nil
            }
        }
        return id
    }

    /// Reads what came and hands each line to its request or to the streams.
    private func receive() {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while fd >= 0 {
            let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            guard n > 0 else {
                disconnect(because: .lost("the daemon closed the connection"))
                return
            }
            for item in framer.feed(buffer[0..<n]) {
                guard case .line(let line) = item, let message = try? JSONParser.parse(line) else {
                    disconnect(because: .lost("the daemon sent something that is not JSON"))
                    return
                }
                handle(message)
            }
        }
    }

    private func handle(_ m: JSON) {
        if m["event"] != nil {
            if subscribed && watching { deliver(m) }
            return
        }
        guard let number = m["id"]?.number, let id = Int(exactly: number) else {
            // An error for the connection itself (closed as idle, the daemon full).
            disconnect(because: m["error"].map(DaemonLink.refusal) ?? .lost("the daemon sent an answer without an id"))
            return
        }
        if id == subscribing {
            subscribing = nil
            subscribed = m["error"] == nil
            // The subscription's answer is the status now: what every stream starts from again.
            if subscribed, watching, let status = m["result"] { deliver(.object(["event": .string("state"), "data": status])) }
            return
        }
        // A late answer (its request timed out) finds nothing and is dropped.
        guard let ask = inFlight.removeValue(forKey: id)?.ask else { return }
        if let error = m["error"] { ask.reply(.failure(DaemonLink.refusal(error))) } else { ask.reply(.success(m["result"] ?? .null)) }
    }

    /// Requests past their deadline are answered as not answered.
    private func expire(_ now: Double) {
        for (id, (ask, _)) in inFlight where ask.deadline <= now {
            inFlight[id] = nil
            ask.reply(.failure(.lost(tr("the daemon did not answer in time", "der Daemon hat nicht rechtzeitig geantwortet"))))
        }
        waiting.removeAll { ask in
            guard ask.deadline <= now else { return false }
            ask.reply(.failure(.lost(tr("the daemon did not answer in time", "der Daemon hat nicht rechtzeitig geantwortet"))))
            return true
        }
    }

    private func deliver(_ event: JSON) {
        link.shared.withLock { $0.events.append(event) }
        link.notify()
    }
}
