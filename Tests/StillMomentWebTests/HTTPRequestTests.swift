// The web server's request parser and its small parsers, tried as an attacker would.
import StillMomentCore
import Testing
@testable import StillMomentWeb

@Suite("HTTP request heads")
struct HTTPRequestTests {
    func parse(_ text: String) throws(HTTPError) -> HTTPRequest {
        try HTTPRequest.parse(head: Array(text.utf8)[...])
    }

    @Test("a plain GET: path, query, headers in lower case, the cookie and the language")
    func plain() throws {
        let r = try parse("GET /api/meditations?q=Tara%20Brach&x=a+b HTTP/1.1\r\nHost: pi:8181\r\nCookie: a=1; sm_token=abc\r\nAccept-Language: de-DE,de;q=0.9,en;q=0.8\r\n\r\n")
        #expect(r.method == "GET")
        #expect(r.path == "/api/meditations")
        #expect(r.query == ["q": "Tara Brach", "x": "a b"])
        #expect(r.header("host") == "pi:8181")
        #expect(r.cookie("sm_token") == "abc")
        #expect(r.language == .de)
        #expect(r.contentLength == 0)
    }

    @Test("Accept-Language with empty parts (`;`, `;;`, `fr,;`, `;,en`) is read, never trapped on",
          arguments: [
            (";", Language.en), (";;", .en), ("fr,;", .en), (";,en", .en), (";,de", .de), (",", .en), (";q=1", .en),
            ("fr,;,de-AT;q=0.5", .de), ("", .en), ("  ;  ,  ;de", .en), ("de;", .de),
          ])
    func emptyLanguageParts(value: String, expected: Language) throws {
        let r = try parse("GET / HTTP/1.1\r\nAccept-Language: \(value)\r\n\r\n")
        #expect(r.language == expected, "\(value.debugDescription)")
    }

    @Test("cookies with empty, nameless or valueless parts are read, never trapped on")
    func oddCookies() throws {
        for value in [";", ";;", "=", "sm_token", "sm_token=", ";sm_token=a;", "=;=", "a=1;;sm_token=b"] {
            let r = try parse("GET / HTTP/1.1\r\nCookie: \(value)\r\n\r\n")
            let expected: String? = switch value {
            case "sm_token=": ""
            case ";sm_token=a;": "a"
            case "a=1;;sm_token=b": "b"
            default: nil
            }
            #expect(r.cookie("sm_token") == expected, "\(value.debugDescription)")
        }
    }

    @Test("the head's end is found only when all of it is there")
    func headEnd() {
        #expect(HTTPRequest.headEnd(Array("GET / HTTP/1.1\r\nHost: x\r\n".utf8)) == nil)
        let whole = Array("GET / HTTP/1.1\r\n\r\nBODY".utf8)
        #expect(HTTPRequest.headEnd(whole) == whole.count - 4)
    }

    @Test("refused: smuggling, folding, bad lengths, bad versions, control characters",
          arguments: [
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
            ("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400),
            ("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
            ("POST / HTTP/1.1\r\nContent-Length: 1e300\r\n\r\n", 400),
            ("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400),
            ("GET / HTTP/2.0\r\n\r\n", 505),
            ("GET http://evil/ HTTP/1.1\r\n\r\n", 400),
            ("GET /%zz HTTP/1.1\r\n\r\n", 400),
            ("GET /%00 HTTP/1.1\r\n\r\n", 400),
            ("get / HTTP/1.1\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nX: a\u{1}b\r\n\r\n", 400),
            ("GET /  HTTP/1.1\r\n\r\n", 400),
          ])
    func refused(head: String, status: Int) {
        #expect(throws: HTTPError.self) { try parse(head) }
        do { _ = try parse(head) } catch { #expect(error.status == status, "\(head.debugDescription)") }
    }

    @Test("a head over 8 KiB, or with more than 64 headers, is 431")
    func tooLarge() {
        let big = "GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 9000) + "\r\n\r\n"
        do { _ = try parse(big); Issue.record("accepted") } catch { #expect(error.status == 431) }
        let many = "GET / HTTP/1.1\r\n" + (0..<70).map { "X\($0): 1\r\n" }.joined() + "\r\n"
        do { _ = try parse(many); Issue.record("accepted") } catch { #expect(error.status == 431) }
    }

    @Test("listen addresses: numeric only, ports in range")
    func listen() throws {
        #expect(try ListenAddress("127.0.0.1:8181") == ListenAddress(host: "127.0.0.1", port: 8181))
        #expect(try ListenAddress("[::]:80").host == "::")
        #expect(try ListenAddress("0.0.0.0:0").port == 0)
        for bad in ["localhost:8181", "127.0.0.1", "127.0.0.1:65536", "1.2.3.256:80", "[::1]8181", "1.2.3:80", "127.0.0.1:-1", "127.0.0.1:1e3", ""] {
            #expect(throws: CoreError.self, "\(bad)") { try ListenAddress(bad) }
        }
    }

    @Test("sizes: 500M, 1G, refused outside 1K..64G")
    func sizes() throws {
        #expect(try ByteSize.parse("500M", option: "x") == 500 << 20)
        #expect(try ByteSize.parse("1g", option: "x") == 1 << 30)
        #expect(try ByteSize.parse("2048", option: "x") == 2048)
        for bad in ["1e300", "0", "100", "65G", "-1M", "1MiB", "nan", "G", "1.2.3M"] {
            #expect(throws: CoreError.self, "\(bad)") { try ByteSize.parse(bad, option: "x") }
        }
    }

    @Test("SHA-256 matches the standard's vectors")
    func sha() {
        #expect(SHA256.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(SHA256.hex(String(repeating: "a", count: 1000)) == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
    }

    @Test("an uploaded file's name keeps no folder and no control character")
    func fileNames() {
        #expect(WebAPI.fileName("../../etc/passwd") == "passwd")
        #expect(WebAPI.fileName("a\u{7}b.mp3") == "ab.mp3")
        #expect(WebAPI.fileName("") == "upload.mp3")
    }
}
