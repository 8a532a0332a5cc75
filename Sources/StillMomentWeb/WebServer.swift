// The web app's HTTP server: one thread, one poll loop over the listening socket, the
// browsers' connections and a wake pipe (the daemon's answers and events come through it
// from the daemon link's thread). No CPU without a browser: with no connection it sleeps in
// poll() until one comes.
//
// Limits (a phone on flaky Wi-Fi and a hostile host on the LAN alike): a request head of
// 8 KiB within 10 s of connecting; a JSON body of 64 KiB; an upload of `maxUpload` bytes
// streamed to a private file, stalled for 30 s at most; 64 connections; an event stream
// whose reader falls 256 KiB behind is dropped. One request a connection.
import CTLS
import FoundationEssentials
import Glibc
import Logging
import StillMomentAudio
import StillMomentControl
import StillMomentCore
import Synchronization

public final class WebServer {
    public struct Options: Sendable {
        public var listen: ListenAddress
        public var maxUpload: Int64
        public var maxConnections = 64
        public var headTimeout = 10.0
        public var stallTimeout = 30.0
        public var maxBacklog = 256 * 1024
        /// How long /api/status waits for the daemon before it says the daemon is not answering.
        public var statusPatience = WebAPI.statusPatience
        public init(listen: ListenAddress, maxUpload: Int64) {
            self.listen = listen
            self.maxUpload = maxUpload
        }
    }

    /// A connection's state.
    final class Connection {
        enum Stage {
            case head
            case body(HTTPRequest)
            case upload(HTTPRequest, Upload)
            /// A job runs on a worker (or the daemon answers over the link); its answer comes back through the wake pipe.
            case waiting
            case writing
            case stream
            /// The answer went out before the body was read: read and drop what still comes, briefly.
            case lingering(until: Double)
        }
        let fd: Int32
        let id: Int
        /// The client's address (PeerAddress: an IPv6 client's /64).
        let peer: String
        var stage = Stage.head
        var input: [UInt8] = []
        var output: [UInt8] = []
        var sent = 0
        var deadline: Double
        var lastSent: Double
        /// The TLS connection (with --tls), its handshake done or not, and whether it
        /// waits for the socket to be writable to go on reading.
        var tls: UnsafeMutableRawPointer?
        /// An event stream's device, and when it was last found still paired.
        var device: Int64?
        var pairedCheckedAt = 0.0
        /// What a waiting job's connection is answered if the job is late (its deadline).
        var fallback: (() -> Response)?
        var handshaken = false
        var tlsWantsWrite = false
        init(fd: Int32, id: Int, peer: String, now: Double, headTimeout: Double) {
            self.fd = fd
            self.id = id
            self.peer = peer
            deadline = now + headTimeout
            lastSent = now
        }
        var pendingOutput: Int { output.count - sent }
    }

    let options: Options
    let log: Logger
    let api: WebAPI
    private var listenFD: Int32 = -1
    private var connections: [Int32: Connection] = [:]
    private var nextID = 1
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// What came from other threads for a connection: an answer, or an event stream's first event.
    enum Delivery: Sendable {
        case response(Response)
        case chunk([UInt8])
    }
    /// Answers computed on workers or by the daemon, waiting for the loop.
    private final class Finished: Sendable { let list = Mutex<[(Int, Delivery)]>([]) }
    private let finished = Finished()
    private let stop = StopFlag()
    /// The one connection to the daemon.
    let link: DaemonLink
    /// The TLS server context (nil: plain HTTP).
    private let tls: UnsafeMutableRawPointer?

    /// With `tls` (CERT, KEY), HTTPS only.
    public convenience init(options: Options, api: WebAPI, log: Logger, tls: (cert: String, key: String)? = nil) throws(WebError) {
        try self.init(options: options, api: api, log: log, tls: tls, daemon: DaemonLink.daemon)
    }

    /// With `daemon`, how the link reaches the daemon (a test's scripted one).
    init(options: Options, api: WebAPI, log: Logger, tls: (cert: String, key: String)?, daemon: @escaping DaemonLink.Connector) throws(WebError) {
        self.options = options
        if let tls {
            var err = [CChar](repeating: 0, count: 512)
            guard let ctx = sm_tls_server(tls.cert, tls.key, &err, err.count) else {
                throw WebError.io("TLS: " + String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
            self.tls = ctx
        } else {
            self.tls = nil
        }
        self.api = api
        self.log = log
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw WebError.io("pipe: \(String(cString: strerror(errno)))") }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        let wake = fds[1]
        link = DaemonLink(log: log, connector: daemon) {
            var b: UInt8 = 1
            _ = write(wake, &b, 1)
        }
        listenFD = try options.listen.bind()
    }

    deinit {
        link.stop()
        for c in connections.values { close(c.fd) }
        if listenFD >= 0 { close(listenFD) }
        close(wakeRead)
        close(wakeWrite)
    }

    /// The port bound (the one asked for, or the kernel's choice for port 0).
    public var port: Int { ListenAddress.boundPort(listenFD) }

    /// Serves until SIGTERM or SIGINT.
    public func run() {
        signal(SIGPIPE, SIG_IGN)
        let wake = wakeWrite
        stop.install([SIGTERM, SIGINT]) { var b: UInt8 = 1; _ = write(wake, &b, 1) }
        CodePages.release()
        var hadConnections = false
        var lastRelease = Self.now()
        while stop.received == nil {
            step()
            // The last browser went: what it made us touch is released (at most once in 10 s).
            if hadConnections && connections.isEmpty && Self.now() - lastRelease > 10 {
                CodePages.release()
                lastRelease = Self.now()
            }
            hadConnections = !connections.isEmpty
        }
        log.info("stopping (signal \(stop.received ?? 0))")
    }

    /// One turn of the loop: waits for something to do (at most until the next deadline).
    func step() {
        let now = Self.now()
        var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        let accepting = connections.count < options.maxConnections + 8
        fds.append(pollfd(fd: accepting ? listenFD : -1, events: Int16(POLLIN), revents: 0))
        let streams = connections.values.contains { if case .stream = $0.stage { return true } else { return false } }
        link.watch(streams)
        let order = Array(connections.values)
        for c in order {
            var ev: Int32 = 0
            switch c.stage {
            case .head, .body, .upload, .lingering: ev = Int32(POLLIN)
            case .stream: ev = Int32(POLLIN)
            case .waiting, .writing: break
            }
            if c.pendingOutput > 0 { ev |= Int32(POLLOUT) }
            if c.tls != nil && (!c.handshaken || c.tlsWantsWrite) { ev |= Int32(POLLIN | POLLOUT) }
            fds.append(pollfd(fd: c.fd, events: Int16(ev), revents: 0))
        }
        // Asleep until something happens: deadlines only matter while connections exist.
        var timeout: Int32 = -1
        if let next = order.map(\.deadline).min() {
            timeout = Int32(max(0, min(60_000, ((next - now) * 1000).rounded(.up) + 1)))
        }
        let r = poll(&fds, nfds_t(fds.count), timeout)
        if r < 0 && errno != EINTR { log.error("poll: \(String(cString: strerror(errno)))") }
        let after = Self.now()
        if fds[0].revents != 0 {
            var buf = [UInt8](repeating: 0, count: 64)
            while read(wakeRead, &buf, buf.count) > 0 {}
            let done = finished.list.withLock { list -> [(Int, Delivery)] in
                defer { list.removeAll() }
                return list
            }
            for (id, delivery) in done {
                guard let c = connections.values.first(where: { $0.id == id }) else { continue }
                switch (delivery, c.stage) {
                case (.response(let response), .waiting): respond(c, response, now: after)
                case (.chunk(let chunk), .stream): queue(c, chunk, now: after)
                default: break  // A job answered late, after its fallback went out: its answer is dropped.
                }
            }
            for event in link.takeEvents() { broadcast(ServerSentEvent.chunk(event), now: after) }
        }
        if fds[1].revents != 0 { acceptAll(now: after) }
        for (i, c) in order.enumerated() {
            let re = Int32(fds[i + 2].revents)
            guard connections[c.fd] === c else { continue }
            if c.tls != nil && (!c.handshaken || c.tlsWantsWrite) {
                if re != 0 { readFrom(c, now: after) }
                continue
            }
            if re & Int32(POLLOUT) != 0 { flush(c, now: after) }
            guard connections[c.fd] === c else { continue }
            if re & Int32(POLLIN | POLLHUP | POLLERR) != 0 { readFrom(c, now: after) }
        }
        // Deadlines: a slow head, a stalled body or upload, a reader that does not read.
        for c in Array(connections.values) where c.deadline <= after {
            switch c.stage {
            case .head, .body, .upload:
                log.info("connection \(c.id): too slow, dropped")
                respondAndLinger(c, .error(408, "timeout", tr("the request came too slowly", "die Anfrage kam zu langsam")), now: after)
            case .stream:
                if c.pendingOutput > 0 && after - c.lastSent > options.stallTimeout || !stillPaired(c, now: after, every: 0) {
                    drop(c)
                } else {
                    queue(c, Array(": ping\n\n".utf8), now: after)
                    c.deadline = after + 20
                }
            case .writing, .lingering:
                drop(c)
            case .waiting:
                if let fallback = c.fallback {
                    c.fallback = nil
                    respond(c, fallback(), now: after)
                } else {
                    c.deadline = after + 3600
                }
            }
        }
    }

    // MARK: connections

    private func acceptAll(now: Double) {
        while true {
            var peer = sockaddr_storage()
            var peerLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(listenFD, $0, &peerLength) }
            }
            if fd < 0 {
                if errno == EINTR { continue }
                return
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            if connections.count >= options.maxConnections && tls != nil {
                close(fd)
                continue
            }
            if connections.count >= options.maxConnections {
                // Full: a short answer if the socket takes it, then closed.
                let bytes = Response.error(503, "busy", tr("too many connections", "zu viele Verbindungen")).bytes()
                _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(fd)
                continue
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let c = Connection(fd: fd, id: nextID, peer: PeerAddress.of(peer), now: now, headTimeout: options.headTimeout)
            nextID += 1
            if let tls {
                guard let conn = sm_tls_accept(tls, fd) else {
                    close(fd)
                    continue
                }
                c.tls = conn
            }
            connections[fd] = c
        }
    }

    private func drop(_ c: Connection) {
        if case .upload(_, let upload) = c.stage { upload.discard() }
        connections[c.fd] = nil
        if let conn = c.tls { sm_tls_close(conn) }
        c.tls = nil
        close(c.fd)
    }

    /// Reads from the socket (through TLS when on): >0 bytes, 0 closed, -1 would block, -2 failed.
    private func receive(_ c: Connection, _ buffer: inout [UInt8]) -> Int {
        if let conn = c.tls {
            var want: Int32 = 0
            let n = buffer.withUnsafeMutableBytes { sm_tls_read(conn, $0.baseAddress, $0.count, &want) }
            c.tlsWantsWrite = n == -1 && want == Int32(SM_TLS_WANT_WRITE)
            return n
        }
        while true {
            let n = recv(c.fd, &buffer, buffer.count, 0)
            if n >= 0 { return n }
            if errno == EINTR { continue }
            return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2
        }
    }

    /// Writes to the socket (through TLS when on): >0 bytes, -1 would block, -2 failed.
    private func transmit(_ c: Connection) -> Int {
        if let conn = c.tls {
            var want: Int32 = 0
            let n = c.output.withUnsafeBytes { raw in sm_tls_write(conn, raw.baseAddress.map { $0 + c.sent }, c.pendingOutput, &want) }
            c.tlsWantsWrite = false
            return n
        }
        while true {
            let n = c.output.withUnsafeBytes { raw in
                send(c.fd, raw.baseAddress.map { $0 + c.sent }, c.pendingOutput, Int32(MSG_NOSIGNAL))
            }
            if n >= 0 { return n }
            if errno == EINTR { continue }
            return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2
        }
    }

    private func readFrom(_ c: Connection, now: Double) {
        if let conn = c.tls, !c.handshaken {
            var want: Int32 = 0
            switch sm_tls_handshake(conn, &want) {
            case 1: c.handshaken = true
            case 0:
                c.tlsWantsWrite = want == Int32(SM_TLS_WANT_WRITE)
                return
            default:
                // Not TLS (plain HTTP to an HTTPS port), or a failed handshake.
                drop(c)
                return
            }
        }
        if c.tls != nil && c.tlsWantsWrite {
            c.tlsWantsWrite = false
            if c.pendingOutput > 0 { flush(c, now: now) }
            guard connections[c.fd] === c else { return }
        }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while connections[c.fd] === c {
            let n = receive(c, &buffer)
            if n == -1 { return }
            if n < 0 {
                drop(c)
                return
            }
            if n == 0 {
                // The browser went away (or shut its side mid-request).
                if case .writing = c.stage, c.pendingOutput > 0 { return }
                drop(c)
                return
            }
            received(c, buffer[0..<n], now: now)
        }
    }

    private func received(_ c: Connection, _ bytes: ArraySlice<UInt8>, now: Double) {
        switch c.stage {
        case .head:
            c.input.append(contentsOf: bytes)
            guard let end = HTTPRequest.headEnd(c.input) else {
                if c.input.count > HTTPRequest.maxHeadBytes {
                    respondAndLinger(c, .error(431, "too-large", tr("the request's head is larger than 8 KiB", "der Kopf der Anfrage ist größer als 8 KiB")), now: now)
                }
                return
            }
            var request: HTTPRequest
            do throws(HTTPError) {
                request = try HTTPRequest.parse(head: c.input[..<end])
                request.peer = c.peer
            } catch {
                respondAndLinger(c, .error(error.status, "bad-request", error.message), now: now)
                return
            }
            let rest = Array(c.input[end...])
            c.input = []
            let plan = Language.speaking(request.language) { api.plan(request, maxUpload: options.maxUpload) }
            switch plan {
            case .refuse(let response):
                respondAndLinger(c, response, now: now)
            case .buffer:
                c.stage = .body(request)
                c.input.reserveCapacity(request.contentLength)
                received(c, rest[...], now: now)
            case .file(let upload):
                c.stage = .upload(request, upload)
                c.deadline = now + options.stallTimeout
                received(c, rest[...], now: now)
            }
        case .body(let request):
            c.input.append(contentsOf: bytes.prefix(request.contentLength - c.input.count))
            if c.input.count >= request.contentLength { handle(c, request, body: c.input, upload: nil, now: now) }
        case .upload(let request, let upload):
            let want = request.contentLength - upload.received
            do throws(WebError) {
                try upload.append(bytes.prefix(want))
            } catch {
                upload.discard()
                c.stage = .writing
                respondAndLinger(c, .error(507, "io", error.description), now: now)
                return
            }
            c.deadline = now + options.stallTimeout
            if upload.received >= request.contentLength { handle(c, request, body: [], upload: upload, now: now) }
        case .lingering, .stream, .writing, .waiting:
            // Dropped: what a browser sends after its request (or a stream's reader) means nothing.
            return
        }
    }

    private func handle(_ c: Connection, _ request: HTTPRequest, body: [UInt8], upload: Upload?, now: Double) {
        c.input = []
        c.stage = .waiting
        let outcome = Language.speaking(request.language) { api.handle(request, body: body, upload: upload) }
        switch outcome {
        case .respond(let response):
            respond(c, response, now: now)
        case .stream(let device):
            c.stage = .stream
            c.device = device
            c.pairedCheckedAt = now
            c.deadline = now + 20
            queue(c, Response.eventStreamHead(), now: now)
            link.watch(true)
            // Its first event: the status now (the daemon's, or that there is none).
            let id = c.id
            link.send(.status, timeout: 5) { [finished = self.finished, wakeWrite = self.wakeWrite] result in
                let chunk: [UInt8]
                if case .success(let status) = result {
                    chunk = ServerSentEvent.chunk(.object(["event": .string("state"), "data": status]))
                } else {
                    chunk = ServerSentEvent.daemonGone
                }
                Self.deliver(.chunk(chunk), to: id, finished, wakeWrite)
            }
        case .daemon(let ask):
            let link = self.link, command = ask.command
            let patience = command == .status ? options.statusPatience : ask.patience
            if command == .status && link.stalled(patience: patience) {
                // A daemon that has not answered for that long already: said at once.
                respond(c, Language.speaking(request.language) { WebAPI.late(command, health: link.health) }, now: now)
                return
            }
            c.deadline = now + patience
            c.fallback = { Language.speaking(request.language) { WebAPI.late(command, health: link.health) } }
            let id = c.id, language = request.language
            // Asked at `now`, as the deadline counts: once the fallback has said "not
            // answering", the next status finds the link stalled and is answered at once
            // (counted from the link's own send, a loaded machine made it wait again).
            link.send(ask.request, start: ask.start, timeout: ask.timeout, asked: now) { [finished = self.finished, wakeWrite = self.wakeWrite] result in
                let response = Language.speaking(language) { WebAPI.answer(command, result) }
                Self.deliver(.response(response), to: id, finished, wakeWrite)
            }
        case .background(let job):
            c.deadline = now + 3600
            let id = c.id, wake = wakeWrite, finished = self.finished
            let language = request.language
            // A thread of its own, not Dispatch's pool: once used, its Linux workqueue woke
            // the idle web app every second from then on (5 wake-ups in 5 s after an upload).
            let started = BackgroundThread.run {
                let response = Language.speaking(language) { job() }
                Self.deliver(.response(response), to: id, finished, wake)
            }
            if !started {
                // No thread to be had (resources exhausted): the job runs here, the loop waits,
                // and its upload is still imported or discarded, never left behind.
                respond(c, Language.speaking(language) { job() }, now: now)
            }
        }
    }

    /// Hands what another thread made for connection `id` to the loop, and wakes it.
    private static func deliver(_ delivery: Delivery, to id: Int, _ finished: Finished, _ wake: Int32) {
        finished.list.withLock { $0.append((id, delivery)) }
        var b: UInt8 = 1
        _ = write(wake, &b, 1)
    }

    private func respond(_ c: Connection, _ response: Response, now: Double) {
        c.stage = .writing
        c.deadline = now + options.stallTimeout
        queue(c, response.bytes(), now: now)
    }

    /// Answers before the body was read; then reads and drops what comes for 2 s so the
    /// browser sees the answer rather than a reset.
    private func respondAndLinger(_ c: Connection, _ response: Response, now: Double) {
        if case .upload(_, let upload) = c.stage { upload.discard() }
        c.input = []
        c.stage = .lingering(until: now + 2)
        c.deadline = now + 2
        queue(c, response.bytes(), now: now)
    }

    private func queue(_ c: Connection, _ bytes: [UInt8], now: Double) {
        if case .stream = c.stage, c.pendingOutput + bytes.count > options.maxBacklog {
            log.info("connection \(c.id): an event stream nobody reads, dropped")
            drop(c)
            return
        }
        if c.sent > 0 && c.sent == c.output.count {
            c.output.removeAll(keepingCapacity: true)
            c.sent = 0
        }
        c.output.append(contentsOf: bytes)
        flush(c, now: now)
    }

    private func flush(_ c: Connection, now: Double) {
        guard c.tls == nil || c.handshaken else { return }
        while c.pendingOutput > 0 {
            let n = transmit(c)
            if n == -1 { return }
            if n < 0 {
                drop(c)
                return
            }
            c.sent += n
            c.lastSent = now
        }
        switch c.stage {
        case .writing:
            drop(c)
        case .lingering:
            // Over TLS the answer is the last word (close_notify follows it); plain HTTP half-closes and drains.
            if c.tls != nil { drop(c) } else { shutdown(c.fd, Int32(SHUT_WR)) }
        default:
            break
        }
    }

    private func broadcast(_ chunk: [UInt8], now: Double) {
        for c in Array(connections.values) {
            guard case .stream = c.stage else { continue }
            if stillPaired(c, now: now, every: 5) { queue(c, chunk, now: now) } else { drop(c) }
        }
    }

    /// Whether an event stream's device is still paired, looked up at most once in `every`
    /// seconds: a revoked browser stops hearing within 5 s while something plays, at its
    /// next keep-alive (20 s) otherwise.
    private func stillPaired(_ c: Connection, now: Double, every: Double) -> Bool {
        guard let device = c.device, now - c.pairedCheckedAt >= every else { return true }
        c.pairedCheckedAt = now
        if api.isPaired(device) { return true }
        log.info("connection \(c.id): device \(device) was revoked, its event stream closed")
        return false
    }

    static func now() -> Double { MonotonicClock.seconds() }
}

public enum WebError: Error, Equatable, Sendable, CustomStringConvertible {
    case io(String)
    case badAddress(String)
    public var description: String {
        switch self {
        case .io(let m), .badAddress(let m): return m
        }
    }
}
