// The web API in process, on a real store in a temporary folder: a sound device named by
// the web is refused wherever it sits, before any route (or the daemon) sees it.
import Foundation
import Glibc
import Logging
import StillMomentControl
import StillMomentCore
import Testing
@testable import StillMomentWeb

@Suite("Web API refusals")
struct WebAPIRefusalTests {
    func withAPI(_ body: (WebAPI, String) throws -> Void) throws {
        var template = Array("/tmp/sm-webapi-XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ buf in buf.baseAddress.flatMap { mkdtemp($0) } }) else {
            Issue.record("mkdtemp failed")
            return
        }
        let dir = String(cString: p)
        defer { _ = system("rm -rf '\(dir)'") }
        WebRegistration.register()   // before the catalog is opened, as main does
        try body(WebAPI(store: try LibraryStore(home: dir + "/home"), secure: false, log: Logger(label: "test")), dir)
    }

    func post(_ api: WebAPI, _ path: String, _ body: String) -> Response? {
        let r = HTTPRequest(method: "POST", path: path, query: [:], headers: [:], contentLength: body.utf8.count)
        guard case .respond(let response) = api.handle(r, body: Array(body.utf8), upload: nil) else { return nil }
        return response
    }

    @Test("a device in /api/timer's options, in /api/play, or nested anywhere: 422 bad-arguments, one wording, nothing run",
          arguments: [
            ("/api/timer", #"{"options":{"duration":"1m","device":"file:FILE=\"|id>PROOF\",FORMAT=raw"}}"#),
            ("/api/play", #"{"meditation":"x","device":"file:FILE=\"|id>PROOF\",FORMAT=raw"}"#),
            ("/api/seek", #"{"by":1000,"x":[{"device":"hw:0"}]}"#),
            ("/api/meditations/abc", #"{"device":"hw:0"}"#),
          ])
    func deviceRefused(path: String, body: String) throws {
        try withAPI { api, dir in
            let proof = dir + "/proof"
            let response = post(api, path, body.replacingOccurrences(of: "PROOF", with: proof))
            #expect(response?.status == 422)
            let text = response.map { String(decoding: $0.body, as: UTF8.self) } ?? ""
            #expect(text.contains("\"bad-arguments\"") && text.contains("the device is the daemon's"), "\(text)")
            #expect(access(proof, F_OK) != 0, "nothing was run")
        }
    }

    @Test("the shared check: a device key anywhere, never a value that merely says device")
    func sharedCheck() {
        #expect(WebAPI.deviceRefusal(.object(["options": .object(["device": .string("hw:0")])])) != nil)
        #expect(WebAPI.deviceRefusal(.object(["a": .array([.object(["b": .object(["device": .null])])])])) != nil)
        #expect(WebAPI.deviceRefusal(.object(["options": .object(["duration": .string("device")])])) == nil)
        #expect(WebAPI.deviceRefusal(.object(["name": .string("device")])) == nil)
    }
}
