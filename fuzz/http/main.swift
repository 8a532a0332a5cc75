// libFuzzer harness for the web app's request reader (Sources/StillMomentWeb/HTTPRequest.swift,
// compiled with the few Core files it uses). Any bytes go to HTTPRequest.headEnd and
// HTTPRequest.parse (the request line, every header, the query's and the path's
// percent-decoding, Content-Length); what parses is read as the server reads it: the
// language (Accept-Language), cookies by several names, headers. The input is also put, as
// it is (CR and LF removed), into an Accept-Language and a Cookie header of a valid head,
// so those two readers see every byte sequence, not only the ones that survive the line
// parser. A refusal must be an HTTP error status with a one-line message; nothing may trap
// or hang. (The web app reads no Range header: it serves the shell whole, with an ETag.)

@inline(never)
func consume<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

/// Reads a parsed request the way the server and the API do, and checks what must hold.
func read(_ r: HTTPRequest) {
    precondition(r.path.hasPrefix("/") && !r.path.contains("\0"), "a bad path got through: \(r.path.debugDescription)")
    precondition(r.contentLength >= 0, "a negative Content-Length")
    precondition(r.headers.keys.allSatisfy { $0 == $0.lowercased() && !$0.isEmpty }, "a header name not in lower case")
    consume(r.language)
    for name in ["sm_token", "", "a", "sm_token=", ";"] { consume(r.cookie(name)) }
    for name in ["host", "origin", "content-length", "if-none-match", "range", "accept-language", "cookie"] { consume(r.header(name)) }
}

func attempt(_ head: ArraySlice<UInt8>) {
    do {
        read(try HTTPRequest.parse(head: head))
    } catch {
        precondition((400...599).contains(error.status), "a refusal with status \(error.status)")
        precondition(!error.message.contains("\n") && !error.message.isEmpty, "a refusal of other than one line: \(error.message.debugDescription)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    // As the server does: the head up to its end, when there is one; else all of it.
    if let end = HTTPRequest.headEnd(bytes) {
        precondition(end >= 4 && end <= bytes.count, "headEnd out of range")
        attempt(bytes[..<end])
    }
    attempt(bytes[...])
    // The same bytes as one Accept-Language and one Cookie header (the header parser keeps
    // them whole once CR and LF are gone).
    let line = bytes.filter { $0 != 0x0D && $0 != 0x0A }
    let head = Array("GET / HTTP/1.1\r\nAccept-Language: ".utf8) + line + Array("\r\nCookie: ".utf8) + line + Array("\r\n\r\n".utf8)
    attempt(head[...])
    // The percent-decoder alone (path and query forms).
    let text = String(decoding: line, as: UTF8.self)
    consume(HTTPRequest.percentDecoded(text[...], plusIsSpace: true))
    consume(HTTPRequest.percentDecoded(text[...], plusIsSpace: false))
    return 0
}
