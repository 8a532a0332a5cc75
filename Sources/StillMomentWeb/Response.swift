// An HTTP response as bytes, with the headers every answer of this server carries: a
// strict Content-Security-Policy, nosniff, no referrer, no framing.
import StillMomentCore
import StillMomentControl

public struct Response: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, contentType: String = "application/json; charset=utf-8", body: [UInt8] = [], headers: [(String, String)] = []) {
        self.status = status
        self.body = body
        self.headers = [("Content-Type", contentType)] + headers
    }

    /// A JSON answer.
    public static func json(_ value: JSON, status: Int = 200, headers: [(String, String)] = []) -> Response {
        Response(status: status, body: Array(value.line.utf8), headers: headers)
    }

    /// An error answer: `{"error":{"code":…,"message":…}}`.
    public static func error(_ status: Int, _ code: String, _ message: String) -> Response {
        json(.object(["error": .object(["code": .string(code), "message": .string(message)])]), status: status)
    }

    public static let securityHeaders: [(String, String)] = [
        ("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            + "manifest-src 'self'; worker-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
        ("Cross-Origin-Opener-Policy", "same-origin"),
        ("Cross-Origin-Resource-Policy", "same-origin"),
    ]

    /// The bytes on the wire; the connection closes after them (one request a connection).
    public func bytes(head: Bool = false) -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        for (k, v) in headers + Self.securityHeaders { text += "\(k): \(v)\r\n" }
        if !headers.contains(where: { $0.0 == "Cache-Control" }) { text += "Cache-Control: no-store\r\n" }
        text += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(text.utf8) + (head ? [] : body)
    }

    /// The head of a server-sent event stream (the connection stays open).
    public static func eventStreamHead() -> [UInt8] {
        var text = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-store\r\n"
        for (k, v) in securityHeaders { text += "\(k): \(v)\r\n" }
        text += "Connection: close\r\nX-Accel-Buffering: no\r\n\r\nretry: 2000\n\n"
        return Array(text.utf8)
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 201: return "Created"
        case 204: return "No Content"
        case 206: return "Partial Content"
        case 304: return "Not Modified"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 415: return "Unsupported Media Type"
        case 416: return "Range Not Satisfiable"
        case 422: return "Unprocessable Content"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 505: return "HTTP Version Not Supported"
        case 507: return "Insufficient Storage"
        default: return "Status"
        }
    }
}
