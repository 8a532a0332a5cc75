// The client side of the control socket: connects (only to a daemon of our own user),
// says hello, sends requests and collects the events pushed in between.
import CSystem
import FoundationEssentials
import Glibc
import StillMomentAudio
import StillMomentCore

/// A connection to the daemon: the hello, then requests (answered in order, matched by
/// id) and the events pushed in between, which are kept until asked for.
public final class ControlClient {
    private let fd: Int32
    private var framer = LineFramer(limit: 4 * ControlProtocol.maxMessageBytes)
    private var lines: [[UInt8]] = []
    private var events: [JSON] = []
    private var nextID = 1
    public private(set) var daemonPID = 0
    public private(set) var daemonHome = ""

    private init(fd: Int32, peerPID: pid_t) {
        self.fd = fd
        daemonPID = Int(peerPID)
    }
    deinit { close(fd) }

    /// Connects to the running daemon; with `startIfNeeded`, starts one (detached, logging
    /// to `daemon.log` in the store's folder) when none answers, stale socket or not.
    /// `helloTimeoutMs`: how long the daemon's hello may take (a caller that must not
    /// wait, the web app's loop, gives little).
    public static func connect(startIfNeeded: Bool = false, helloTimeoutMs: Int32 = 10_000) throws(ControlError) -> ControlClient {
        let path = ControlPaths.socket
        // Nothing is sent to a socket whose folder or owner is not ours (another user may
        // have made /tmp/stillmoment-UID first), nor to a peer of another uid.
        var (fd, peer) = try ControlPaths.connectTrusted(path)
        if fd < 0 {
            let err = -fd
            guard err == ENOENT || err == ECONNREFUSED else {
                throw ControlError.io("cannot reach the daemon at \(path): \(String(cString: strerror(err)))")
            }
            // A daemon started from another environment (cron, a login shell) listens elsewhere.
            var refusal: ControlError?
            for other in ControlPaths.socketCandidates.dropFirst() {
                do {
                    let candidate = try ControlPaths.connectTrusted(other)
                    if candidate.fd >= 0 {
                        (fd, peer) = candidate
                        break
                    }
                } catch {
                    refusal = refusal ?? error
                }
            }
            // Nothing was sent to an untrusted candidate. Asked about a daemon, the client
            // says why it did not look there; asked to start one, it starts its own in its
            // own folder (checked again there), so a folder planted in /tmp cannot stop it.
            if fd < 0, !startIfNeeded, let refusal { throw refusal }
        }
        if fd < 0 {
            guard startIfNeeded else { throw ControlError.noDaemon }
            let (log, logStart, ready) = try startDaemon()
            defer { close(ready) }
            // The daemon opens the store (and migrates it) before it listens, then writes a
            // byte to the pipe and closes it: allow 10 s for a slow SD card. Another daemon
            // started at the same moment serves: it says so, and that one is waited for. The
            // pipe closed without a byte: it failed, and its log says why, now.
            let started = waitForReady(ready, timeoutMs: 10_000)
            let tries = switch started { case .serving: 40; case .anotherServes: 400; case .exited, .noAnswer: 1 }
            for i in 0..<tries {
                if i > 0 { usleep(25_000) }
                (fd, peer) = try ControlPaths.connectTrusted(path)
                if fd >= 0 { break }
            }
            guard fd >= 0 else {
                let why = lastLine(of: log, from: logStart) ?? tr("no reason given", "ohne Angabe eines Grundes")
                throw ControlError.io(tr("the daemon did not start: \(why) (see \(log))", "der Daemon ist nicht gestartet: \(why) (siehe \(log))"))
            }
        }
        let client = ControlClient(fd: fd, peerPID: peer)
        try client.hello(timeoutMs: helloTimeoutMs)
        return client
    }

    private func hello(timeoutMs: Int32) throws(ControlError) {
        do {
            // The daemon answers in the language of this client's user.
            try write(.object(["hello": .object(["version": .number(Double(ControlProtocol.version)), "client": .string("stillmoment"),
                                                 "language": .string(Language.current.rawValue)])]))
        } catch {
            // A daemon that refuses us (another user, too many clients) says why and closes
            // at once, possibly before our hello went out: its reason is still to be read.
            if let m = try? readMessage(timeoutMs: 500, allowTimeout: true), let refusal = m["error"] {
                throw Self.refusal(refusal)
            }
            throw error
        }
        let answer = try readMessage(timeoutMs: timeoutMs)
        if let error = answer["error"] { throw Self.refusal(error) }
        guard let h = answer["hello"] else { throw ControlError.lost("the daemon did not say hello") }
        // The pid a user may be told to `kill` is the kernel's (SO_PEERCRED), not the one
        // the daemon names; that one only stands in if the kernel gave none.
        if daemonPID <= 0, let pid = h["pid"]?.number, pid >= 1, pid <= Double(Int32.max) { daemonPID = Int(pid) }
        daemonHome = h["home"]?.string ?? ""
    }

    /// Sends a request and waits for its answer as it came (the status object, for
    /// `status --json` and the web app); events that arrive meanwhile are kept.
    @discardableResult
    public func answer(_ request: Request, timeoutMs: Int32 = 30_000) throws(ControlError) -> JSON {
        let id = nextID
        nextID += 1
        var message: [String: JSON] = ["id": .number(Double(id)), "command": .string(request.command.rawValue)]
        let args = request.args
        if !args.isEmpty { message["args"] = .object(args) }
        try write(.object(message))
        while true {
            let m = try readMessage(timeoutMs: timeoutMs)
            if m["event"] != nil {
                events.append(m)
                continue
            }
            if let error = m["error"] { throw Self.refusal(error) }
            guard m["id"]?.number == Double(id) else { continue }
            return m["result"] ?? .null
        }
    }

    /// Sends a request and waits for its answer, the status:
    /// `client.send(.seek(.by(15_000)))`.
    @discardableResult
    public func send(_ request: Request, timeoutMs: Int32 = 30_000) throws(ControlError) -> Status {
        let answer = try answer(request, timeoutMs: timeoutMs)
        guard let status = answer.decoded(as: Status.self) else {
            throw ControlError.lost("the daemon's answer to \(request.command.rawValue) is not a status")
        }
        return status
    }

    /// The next pushed event, typed (nil if none came within `timeoutMs`, or one this
    /// client does not know).
    public func nextTypedEvent(timeoutMs: Int32) throws(ControlError) -> Event? {
        try nextEvent(timeoutMs: timeoutMs)?.decoded(as: Event.self)
    }

    /// The next pushed event, waiting up to `timeoutMs` (nil if none came).
    public func nextEvent(timeoutMs: Int32) throws(ControlError) -> JSON? {
        if !events.isEmpty { return events.removeFirst() }
        guard let m = try readMessage(timeoutMs: timeoutMs, allowTimeout: true) else { return nil }
        return m["event"] != nil ? m : nil
    }

    /// The socket, for a caller's own poll loop (the web app's event link).
    public var descriptor: Int32 { fd }

    /// The events that have arrived, without waiting (after `descriptor` polled readable).
    public func availableEvents() throws(ControlError) -> [JSON] {
        var out = events
        events.removeAll()
        while let m = try readMessage(timeoutMs: 0, allowTimeout: true) {
            if m["event"] != nil { out.append(m) }
        }
        return out
    }

    private static func refusal(_ error: JSON) -> ControlError {
        ControlError.refusal(error)
    }

    // MARK: the wire

    private func write(_ message: JSON) throws(ControlError) {
        let bytes = Array((message.line + "\n").utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return Glibc.send(fd, base + done, raw.count - done, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw ControlError.lost("the daemon closed the connection")
            }
            done += n
        }
    }

    private func readMessage(timeoutMs: Int32) throws(ControlError) -> JSON {
        guard let m = try readMessage(timeoutMs: timeoutMs, allowTimeout: false) else {
            throw ControlError.lost("the daemon did not answer")
        }
        return m
    }

    private func readMessage(timeoutMs: Int32, allowTimeout: Bool) throws(ControlError) -> JSON? {
        while lines.isEmpty {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let r = poll(&p, 1, timeoutMs)
            if r < 0 && errno == EINTR { continue }
            if r == 0 {
                if allowTimeout { return nil }
                throw ControlError.lost("the daemon did not answer within \(timeoutMs / 1000) s")
            }
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            let n = read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw ControlError.lost("the daemon closed the connection") }
            for item in framer.feed(buffer[0..<n]) {
                if case .line(let l) = item { lines.append(l) }
            }
        }
        let line = lines.removeFirst()
        guard let value = try? JSONParser.parse(line) else {
            throw ControlError.lost("the daemon sent something that is not JSON")
        }
        return value
    }

    // MARK: starting the daemon

    /// What a daemon started on demand said on its readiness pipe.
    enum Started { case serving, anotherServes, exited, noAnswer }

    /// The daemon's byte (ReadyByte) or the pipe's end; `.noAnswer` when the time ran out.
    private static func waitForReady(_ fd: Int32, timeoutMs: Int32) -> Started {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        var left = timeoutMs
        while left > 0 {
            let t0 = MonotonicClock.milliseconds()
            let n = poll(&pfd, 1, left)
            if n > 0 {
                var byte: UInt8 = 0
                guard read(fd, &byte, 1) == 1 else { return .exited }
                switch byte {
                case ReadyByte.serving: return .serving
                case ReadyByte.anotherServes: return .anotherServes
                default: return .exited
                }
            }
            if n < 0 && errno != EINTR { return .noAnswer }
            left -= Int32(clamping: MonotonicClock.milliseconds() - t0)
        }
        return .noAnswer
    }

    /// Starts `stillmoment daemon --on-demand` detached: its log's path, where this start's
    /// lines begin in it, and the read end of its readiness pipe.
    private static func startDaemon() throws(ControlError) -> (log: String, logStart: Int64, ready: Int32) {
        try ControlPaths.prepareFolder()
        var home = Paths.home
        if !home.hasPrefix("/") {
            var buf = [CChar](repeating: 0, count: 4096)
            if getcwd(&buf, buf.count) != nil {
                home = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/" + home
            }
        }
        do { try Paths.makeFolder(home) } catch { throw ControlError.io(error.description) }
        // The daemon runs from / with this environment: the store must be an absolute path.
        setenv("STILLMOMENT_HOME", home, 1)
        let logPath = home + "/daemon.log"
        let logFD = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard logFD >= 0 else { throw ControlError.io("cannot open \(logPath): \(String(cString: strerror(errno)))") }
        defer { close(logFD) }
        let logStart = Int64(lseek(logFD, 0, SEEK_END))
        guard let exe = Paths.executable else {
            throw ControlError.io(tr("cannot find the stillmoment executable", "das Programm stillmoment ist nicht zu finden"))
        }
        var pipeFDs: [Int32] = [-1, -1]
        let p = sm_pipe_cloexec(&pipeFDs)
        guard p == 0 else { throw ControlError.io(tr("cannot start the daemon: ", "der Daemon lässt sich nicht starten: ") + String(cString: strerror(-p))) }
        let args = [exe, "daemon", "--on-demand", "--ready-fd", "3"]
        var cArgs = args.map { strdup($0) }
        cArgs.append(nil)
        defer { for a in cArgs { free(a) } }
        let r = sm_spawn_detached(exe, cArgs, logFD, pipeFDs[1])
        close(pipeFDs[1])
        guard r == 0 else {
            close(pipeFDs[0])
            throw ControlError.io(tr("cannot start the daemon: ", "der Daemon lässt sich nicht starten: ") + String(cString: strerror(-r)))
        }
        return (logPath, logStart, pipeFDs[0])
    }

    /// The last line this start wrote to the log (from `offset` on; of the last 64 KiB),
    /// without the "stillmoment: error: " it was printed with; nil when it wrote none (a
    /// daemon killed before a word: a line from an earlier run would mislead).
    private static func lastLine(of path: String, from offset: Int64) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: 65536)
        let from = max(0, offset, Int64(st.st_size) - Int64(bytes.count))
        let n = pread(fd, &bytes, bytes.count, off_t(from))
        guard n > 0, var line = String(decoding: bytes[..<n], as: UTF8.self).split(separator: "\n").last.map(String.init) else {
            return nil
        }
        for prefix in ["stillmoment: ", "error: ", "Fehler: "] where line.hasPrefix(prefix) { line.removeFirst(prefix.count) }
        return line
    }
}

/// What a daemon started on demand writes to its client's readiness pipe before closing it
/// (letters: no errno or stray byte reads as one).
public enum ReadyByte {
    /// It listens.
    public static let serving = UInt8(ascii: "R")
    /// Another daemon took the lock first (started at the same moment) and serves.
    public static let anotherServes = UInt8(ascii: "A")
}
