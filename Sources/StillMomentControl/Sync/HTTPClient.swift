/// A small HTTP/1.1 client for sync: one request a connection (the hub's server closes
/// after each answer), a deadline on the whole exchange, an answer read up to a limit and
/// never past its Content-Length. `http://` on a LAN one trusts, or `https://` to a hub
/// serving `--tls`: its certificate is pinned by its SHA-256 fingerprint (taken at pairing,
/// or given), not checked against any authority (a hub's certificate is its own).
import CTLS
import FoundationEssentials
import Glibc
import StillMomentCore
import Synchronization

public struct HTTPClient: Sendable {
    public let host: String
    public let port: UInt16
    /// Whether the hub is spoken to over TLS (`https://`).
    public let secure: Bool
    /// The hub's certificate fingerprint (SHA-256 of its DER, hex) every answer must come
    /// with over TLS; nil: taken as it is (pairing), and told in `Answer.fingerprint`.
    public var pinned: String?
    /// The whole exchange's limit, in seconds.
    public var timeout: Double = 15
    /// The largest answer read (head and body).
    public var maximumResponse = 16 << 20

    public struct Answer: Sendable {
        public var status: Int
        public var body: [UInt8]
        /// Over TLS: the fingerprint of the certificate the hub showed.
        public var fingerprint: String? = nil
    }

    /// A fingerprint as a user copies it (`openssl x509 -fingerprint -sha256`: colons, upper
    /// case), as 64 lower-case hex digits; nil when it is none.
    public static func fingerprint(_ text: String) -> String? {
        let hex = text.lowercased().filter { $0 != ":" }
        guard hex.utf8.count == 64, hex.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else { return nil }
        return hex
    }

    /// Reads `http[s]://HOST[:PORT][/]`: a host name or address (IPv6 in brackets), a port
    /// 1–65535 (default 80, or 443), nothing after the path's slash.
    public init(url: String, pinned: String? = nil) throws(SyncError) {
        func refuse(_ en: String, _ de: String) -> SyncError {
            .refused(both("'\(Display.clean(String(url.prefix(200))))' \(en)", "'\(Display.clean(String(url.prefix(200))))' \(de)"))
        }
        secure = url.hasPrefix("https://")
        self.pinned = pinned
        guard url.hasPrefix("http://") || secure else { throw refuse("is not a hub's address (http://HOST:PORT)", "ist keine Hub-Adresse (http://HOST:PORT)") }
        var rest = Substring(url.dropFirst(secure ? 8 : 7))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@"), rest.utf8.count <= 255,
              rest.unicodeScalars.allSatisfy({ $0.isASCII && !Display.isControl($0) && $0 != " " }) else {
            throw refuse("is not a hub's address (http://HOST:PORT)", "ist keine Hub-Adresse (http://HOST:PORT)")
        }
        var hostPart = rest
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw refuse("has an unclosed [", "hat eine offene [") }
            hostPart = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw refuse("is not a hub's address", "ist keine Hub-Adresse") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            hostPart = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        }
        var port: UInt16 = secure ? 443 : 80
        if let portText {
            guard let p = UInt16(portText), p > 0 else { throw refuse("has no port 1–65535", "hat keinen Port 1–65535") }
            port = p
        }
        guard !hostPart.isEmpty else { throw refuse("names no host", "nennt keinen Rechner") }
        host = String(hostPart)
        self.port = port
    }

    /// One request and its answer.
    public func send(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8] = []) throws(SyncError) -> Answer {
        let deadline = Self.now() + timeout
        let fd = try connect(deadline: deadline)
        var conn = Connection(fd: fd)
        defer { conn.close() }
        var seen: String?
        if secure {
            seen = try handshake(&conn, deadline: deadline)
            if let pinned, seen != pinned {
                throw .refused(both("the hub at \(address) shows another certificate than the one paired with (\(seen?.prefix(16) ?? "none")…, not \(pinned.prefix(16))…): if the hub has a new one, pair again (`stillmoment sync pair`)",
                                    "der Hub unter \(address) zeigt ein anderes Zertifikat als das beim Koppeln (\(seen?.prefix(16) ?? "keins")…, nicht \(pinned.prefix(16))…): hat der Hub ein neues, neu koppeln (`stillmoment sync pair`)"))
            }
        }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host.contains(":") ? "[\(host)]" : host):\(port)\r\nConnection: close\r\n"
        head += "Content-Length: \(body.count)\r\nAccept-Language: \(Language.current == .de ? "de" : "en")\r\n"
        if !body.isEmpty { head += "Content-Type: application/json\r\n" }
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        head += "\r\n"
        try write(&conn, Array(head.utf8) + body, deadline: deadline)
        var answer = try read(&conn, deadline: deadline)
        answer.fingerprint = seen
        return answer
    }

    /// A socket, and its TLS connection over it when the hub speaks TLS.
    private struct Connection {
        let fd: Int32
        var tls: UnsafeMutableRawPointer?

        /// Bytes written (> 0), or nil and the way to wait.
        mutating func send(_ bytes: UnsafeRawBufferPointer) -> (Int?, Int16, String?) {
            if let tls {
                var want: Int32 = 0
                let n = sm_tls_write(tls, bytes.baseAddress, bytes.count, &want)
                if n > 0 { return (n, 0, nil) }
                if n == -1 { return (nil, want == SM_TLS_WANT_READ ? Int16(POLLIN) : Int16(POLLOUT), nil) }
                return (nil, 0, "the TLS connection failed")
            }
            let n = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if n >= 0 { return (n, 0, nil) }
            if errno == EAGAIN || errno == EINTR { return (nil, Int16(POLLOUT), nil) }
            return (nil, 0, String(cString: strerror(errno)))
        }

        /// Bytes read (0: the end), or nil and the way to wait.
        mutating func receive(_ buffer: UnsafeMutableRawBufferPointer) -> (Int?, Int16, String?) {
            if let tls {
                var want: Int32 = 0
                let n = sm_tls_read(tls, buffer.baseAddress, buffer.count, &want)
                if n >= 0 { return (n, 0, nil) }
                if n == -1 { return (nil, want == SM_TLS_WANT_WRITE ? Int16(POLLOUT) : Int16(POLLIN), nil) }
                return (nil, 0, "the TLS connection failed")
            }
            let n = recv(fd, buffer.baseAddress, buffer.count, 0)
            if n >= 0 { return (n, 0, nil) }
            if errno == EAGAIN || errno == EINTR { return (nil, Int16(POLLIN), nil) }
            return (nil, 0, String(cString: strerror(errno)))
        }

        mutating func close() {
            if let tls { sm_tls_close(tls) }
            tls = nil
            Glibc.close(fd)
        }
    }

    /// The process's TLS client context, made on first use (OpenSSL loaded then); an
    /// SSL_CTX set up once is shared by threads.
    private enum ClientContext {
        private static let context = Mutex<UnsafeMutableRawPointer?>(nil)
        static func get() throws(SyncError) -> UnsafeMutableRawPointer {
            let made = context.withLock { ctx -> Result<UnsafeMutableRawPointer, SyncError> in
                if let ctx { return .success(ctx) }
                var err = [CChar](repeating: 0, count: 256)
                guard let new = sm_tls_client(&err, err.count) else {
                    let text = "TLS: " + HTTPClient.text(err)
                    return .failure(.unreachable(both(text, text)))
                }
                ctx = new
                return .success(new)
            }
            switch made {
            case .success(let ctx): return ctx
            case .failure(let e): throw e
            }
        }
    }

    static func text(_ c: [CChar]) -> String {
        String(decoding: c.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The TLS handshake; the fingerprint of the certificate the hub showed.
    private func handshake(_ conn: inout Connection, deadline: Double) throws(SyncError) -> String {
        let ctx = try ClientContext.get()
        let isName = host.first.map { !$0.isNumber } ?? false && !host.contains(":")
        guard let tls = sm_tls_connect(ctx, conn.fd, isName ? host : nil) else { throw unreachable("TLS could not start") }
        conn.tls = tls
        while true {
            var want: Int32 = 0
            let r = sm_tls_handshake(tls, &want)
            if r == 1 { break }
            guard r == 0 else { throw unreachable("the TLS handshake failed (is it a hub with --tls?)") }
            guard wait(conn.fd, want == SM_TLS_WANT_WRITE ? Int16(POLLOUT) : Int16(POLLIN), deadline: deadline) else {
                throw unreachable("no answer in \(Int(timeout)) s")
            }
        }
        var out = [CChar](repeating: 0, count: 65)
        guard sm_tls_peer_fingerprint(tls, &out, out.count) == 0 else { throw unreachable("the hub showed no certificate") }
        return Self.text(out)
    }

    private var address: String { "\(host):\(port)" }

    private func unreachable(_ why: String) -> SyncError {
        .unreachable(both("the hub at \(address) cannot be reached: \(why)", "der Hub unter \(address) ist nicht erreichbar: \(why)"))
    }

    private func connect(deadline: Double) throws(SyncError) -> Int32 {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else { throw unreachable(String(cString: gai_strerror(rc))) }
        defer { freeaddrinfo(list) }
        var lastError = "no address"
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let ai = node {
            node = ai.pointee.ai_next
            let fd = socket(ai.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            guard fd >= 0 else { lastError = String(cString: strerror(errno)); continue }
            if Glibc.connect(fd, ai.pointee.ai_addr, ai.pointee.ai_addrlen) == 0 || errno == EINPROGRESS {
                if wait(fd, Int16(POLLOUT), deadline: deadline) {
                    var err: Int32 = 0
                    var len = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
                    if err == 0 { return fd }
                    lastError = String(cString: strerror(err))
                } else {
                    lastError = "no answer in \(Int(timeout)) s"
                }
            } else {
                lastError = String(cString: strerror(errno))
            }
            close(fd)
        }
        throw unreachable(lastError)
    }

    private func wait(_ fd: Int32, _ events: Int16, deadline: Double) -> Bool {
        while true {
            let left = deadline - Self.now()
            guard left > 0 else { return false }
            var p = pollfd(fd: fd, events: events, revents: 0)
            let n = poll(&p, 1, Int32(min(left * 1000, 60_000)) + 1)
            if n > 0 { return true }
            if n < 0 && errno != EINTR { return false }
        }
    }

    private func write(_ conn: inout Connection, _ bytes: [UInt8], deadline: Double) throws(SyncError) {
        var sent = 0
        while sent < bytes.count {
            let (n, wantEvents, failure) = bytes.withUnsafeBytes { conn.send(UnsafeRawBufferPointer(rebasing: $0[sent...])) }
            if let failure { throw unreachable(failure) }
            if let n { sent += n; continue }
            guard wait(conn.fd, wantEvents, deadline: deadline) else { throw unreachable("no answer in \(Int(timeout)) s") }
        }
    }

    private func read(_ conn: inout Connection, deadline: Double) throws(SyncError) -> Answer {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var headEnd: Int?
        var length: Int?
        while true {
            if let headEnd, let length, data.count >= headEnd + length { break }
            let (got, wantEvents, failure) = buffer.withUnsafeMutableBytes { conn.receive($0) }
            if let failure { throw unreachable(failure) }
            guard let n = got else {
                guard wait(conn.fd, wantEvents, deadline: deadline) else { throw unreachable("no answer in \(Int(timeout)) s") }
                continue
            }
            if n == 0 { break }
            data.append(contentsOf: buffer[0..<n])
            guard data.count <= maximumResponse else {
                throw .refused(both("the hub's answer is larger than \(maximumResponse >> 20) MiB", "die Antwort des Hubs ist größer als \(maximumResponse >> 20) MiB"))
            }
            if headEnd == nil {
                if let end = Self.find([13, 10, 13, 10], in: data, from: max(0, data.count - n - 3)) {
                    guard end <= Self.maximumHead else {
                        throw .refused(both("the hub's answer has a head of over 16 KiB", "die Antwort des Hubs hat einen Kopf von über 16 KiB"))
                    }
                    headEnd = end + 4
                    length = try Self.contentLength(data[0..<end])
                    if let l = length, l > maximumResponse {
                        throw .refused(both("the hub announces an answer of \(l) bytes", "der Hub kündigt eine Antwort von \(l) Bytes an"))
                    }
                } else if data.count > Self.maximumHead {
                    throw .refused(both("the hub's answer has a head of over 16 KiB", "die Antwort des Hubs hat einen Kopf von über 16 KiB"))
                }
            }
        }
        guard let headEnd, data.count >= 12, data[0..<5].elementsEqual("HTTP/".utf8),
              let status = Int(String(decoding: data[9..<12], as: UTF8.self)) else {
            throw .refused(both("the hub at \(address) did not answer in HTTP", "der Hub unter \(address) antwortete nicht in HTTP"))
        }
        var body = Array(data[headEnd...])
        if let length {
            guard body.count >= length else { throw unreachable("the answer broke off") }
            body = Array(body.prefix(length))
        }
        return Answer(status: status, body: body)
    }

    /// The longest head read before its end is found.
    static let maximumHead = 16 * 1024

    /// Where `needle` starts in `data` at or after `from` (only the bytes a read added, and
    /// the three before them, are looked at again).
    private static func find(_ needle: [UInt8], in data: [UInt8], from: Int) -> Int? {
        guard data.count >= needle.count, from <= data.count - needle.count else { return nil }
        outer: for i in from...(data.count - needle.count) {
            for (k, b) in needle.enumerated() where data[i + k] != b { continue outer }
            return i
        }
        return nil
    }

    /// The answer's Content-Length: digits only, one header (nil: none, read to the end).
    private static func contentLength(_ head: ArraySlice<UInt8>) throws(SyncError) -> Int? {
        var found: Int?
        for line in String(decoding: head, as: UTF8.self).split(separator: "\r\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "content-length" else { continue }
            let text = String(parts[1]).trimmingWhitespace()
            guard found == nil, !text.isEmpty, text.utf8.count <= 12, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(text) else {
                throw .refused(both("the hub's answer has a bad Content-Length", "die Antwort des Hubs hat eine falsche Content-Length"))
            }
            found = n
        }
        return found
    }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
