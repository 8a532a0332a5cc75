// HTTP/1.1 request heads, parsed strictly: one request per connection, a head of at most
// 8 KiB, a body only with Content-Length (no chunked bodies, no folded or duplicate length
// headers: what a request smuggler or a slow reader would use is refused).
#if canImport(StillMomentCore)
import StillMomentCore      // (the fuzz harness compiles Language.swift and TimeText.swift in instead)
#endif

/// A refusal with its HTTP status; `message` is for people (one line).
public struct HTTPError: Error, Equatable, Sendable {
    public let status: Int
    public let message: String
    public init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }
}

public struct HTTPRequest: Sendable, Equatable {
    public var method: String
    /// The decoded path (`/api/meditations/abc`).
    public var path: String
    public var query: [String: String]
    /// Header names in lower case; a repeated header's values joined with ", ".
    public var headers: [String: String]
    public var contentLength: Int
    /// The client's address (set by the server, not read from the head; PeerAddress).
    public var peer = ""

    public static let maxHeadBytes = 8 * 1024
    public static let maxHeaders = 64

    public func header(_ name: String) -> String? { headers[name] }

    /// The head's end in `bytes` (the index after CRLF CRLF), or nil when not all there yet.
    public static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var i = 3
        while i < bytes.count {
            if bytes[i] == 0x0A, bytes[i - 1] == 0x0D, bytes[i - 2] == 0x0A, bytes[i - 3] == 0x0D { return i + 1 }
            i += 1
        }
        return nil
    }

    /// Parses a head (request line and headers, up to and including the empty line).
    public static func parse(head: ArraySlice<UInt8>) throws(HTTPError) -> HTTPRequest {
        guard head.count <= maxHeadBytes else { throw HTTPError(431, "the request's head is larger than 8 KiB") }
        guard let text = String(validating: head, as: UTF8.self) else { throw HTTPError(400, "the request's head is not UTF-8") }
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        while lines.last == "" { lines.removeLast() }
        guard let requestLine = lines.first else { throw HTTPError(400, "no request line") }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw HTTPError(400, "a request line is METHOD TARGET VERSION") }
        let method = String(parts[0])
        guard !method.isEmpty, method.utf8.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }) else { throw HTTPError(400, "a bad method") }
        guard parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0" else { throw HTTPError(505, "only HTTP/1.1 is spoken here") }
        let target = parts[1]
        guard target.hasPrefix("/"), target.utf8.count <= 2048 else { throw HTTPError(400, "the target must be a path of at most 2048 bytes") }
        let (rawPath, rawQuery) = target.firstIndex(of: "?").map { (target[..<$0], target[target.index(after: $0)...]) } ?? (target, "")
        guard let path = percentDecoded(rawPath, plusIsSpace: false), !path.contains("\0") else { throw HTTPError(400, "a bad path") }
        var query: [String: String] = [:]
        for pair in rawQuery.split(separator: "&") where !pair.isEmpty {
            let (k, v) = pair.firstIndex(of: "=").map { (pair[..<$0], pair[pair.index(after: $0)...]) } ?? (pair, "")
            guard let key = percentDecoded(k, plusIsSpace: true), let value = percentDecoded(v, plusIsSpace: true) else {
                throw HTTPError(400, "a bad query")
            }
            query[key] = value
        }
        var headers: [String: String] = [:]
        var lengths = 0
        guard lines.count - 1 <= maxHeaders else { throw HTTPError(431, "more than \(maxHeaders) headers") }
        for line in lines.dropFirst() {
            // Folded lines (obsolete) and names with spaces are refused, not guessed at.
            guard let colon = line.firstIndex(of: ":"), let first = line.first, first != " ", first != "\t" else {
                throw HTTPError(400, "a bad header line")
            }
            let name = line[..<colon].lowercased()
            guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw HTTPError(400, "a bad header name") }
            let value = String(line[line.index(after: colon)...]).trimmingWhitespace()
            guard !value.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" }) else { throw HTTPError(400, "a control character in a header") }
            if name == "content-length" { lengths += 1 }
            headers[name] = headers[name].map { $0 + ", " + value } ?? value
        }
        if let te = headers["transfer-encoding"], te.lowercased() != "identity" {
            throw HTTPError(501, "chunked request bodies are not accepted; send a Content-Length")
        }
        var contentLength = 0
        if let cl = headers["content-length"] {
            guard lengths == 1, !cl.isEmpty, cl.utf8.count <= 15, cl.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(cl) else {
                throw HTTPError(400, "a bad Content-Length")
            }
            contentLength = n
        }
        return HTTPRequest(method: method, path: path, query: query, headers: headers, contentLength: contentLength)
    }

    /// `%XX` decoded (and `+` as a space in a query); nil when malformed or not UTF-8.
    static func percentDecoded(_ s: Substring, plusIsSpace: Bool) -> String? {
        var out: [UInt8] = []
        var it = Array(s.utf8)[...]
        while let c = it.popFirst() {
            if c == UInt8(ascii: "%") {
                guard let h = it.popFirst(), let l = it.popFirst(), let hv = hexValue(h), let lv = hexValue(l) else { return nil }
                out.append(hv << 4 | lv)
            } else if c == UInt8(ascii: "+"), plusIsSpace {
                out.append(0x20)
            } else {
                out.append(c)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }

    /// A cookie's value (`sm_token`), nil when absent.
    public func cookie(_ name: String) -> String? {
        guard let header = headers["cookie"] else { return nil }
        for part in header.split(separator: ";") {
            let p = String(part).trimmingWhitespace()
            if p.hasPrefix(name + "=") { return String(p.dropFirst(name.count + 1)) }
        }
        return nil
    }

    /// The preferred language from Accept-Language (German when it comes first).
    public var language: Language {
        guard let al = headers["accept-language"] else { return .en }
        // `;`, `fr,;` or `;,en`: a part may be empty before its `;` (never indexed, only read up to it).
        for part in al.split(separator: ",") {
            let tag = String(part.prefix { $0 != ";" }).trimmingWhitespace().lowercased()
            if tag.hasPrefix("de") { return .de }
            if tag.hasPrefix("en") { return .en }
        }
        return .en
    }
}
