// The same bad edit through the web API and through the library service the CLI's `edit`
// calls: one rule, one error (422 bad-arguments on the web, bad input, exit 2, on the CLI),
// in the same words. Unknown fields are refused by name, pairing's too.
import Foundation
import Glibc
import Logging
import StillMomentControl
import StillMomentCore
import Testing
@testable import StillMomentWeb

@Suite("One rule for every front-end")
struct OneRuleTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func post(_ api: WebAPI, _ path: String, _ body: String) -> (status: Int, text: String) {
        let r = HTTPRequest(method: "POST", path: path, query: [:], headers: [:], contentLength: body.utf8.count)
        guard case .respond(let response) = api.handle(r, body: Array(body.utf8), upload: nil) else { return (0, "") }
        return (response.status, String(decoding: response.body, as: UTF8.self))
    }

    @Test("a meditation's bad name, teacher, album or trim: the web and the CLI's service refuse it alike")
    func sameEditSameError() throws {
        let home = NSTemporaryDirectory() + "sm-onerule-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: home) }
        setenv("STILLMOMENT_SOUNDS", Self.root.appendingPathComponent("Sounds").path, 1)
        WebRegistration.register()   // before the catalog is opened, as main does
        let store = try LibraryStore(home: home)
        guard case .imported(let m) = try Importer(store: store).importFile(Self.root.appendingPathComponent("Tests/Fixtures/cbr.mp3").path) else {
            Issue.record("the fixture did not import")
            return
        }
        let api = WebAPI(store: store, secure: false, log: Logger(label: "test"))
        let cases: [(json: String, edit: MeditationEdit, says: String)] = [
            (#"{"name":"a\tb"}"#, MeditationEdit(name: "a\tb"), "is not a name here"),
            (#"{"teacher":"x\u202Ey"}"#, MeditationEdit(teacher: "x\u{202E}y"), "is not a name here"),
            (#"{"name":""}"#, MeditationEdit(name: ""), "is not a name here"),
            ("{\"album\":\"\(String(repeating: "a", count: 201))\"}", MeditationEdit(album: String(repeating: "a", count: 201)), "is not a name here"),
            (#"{"trimEnd":99000000}"#, MeditationEdit(trimEnd: .set(99_000_000)), "is past the end"),
            (#"{"trimStart":-5}"#, MeditationEdit(trimStart: .set(-5)), "not negative"),
            (#"{"startGong":"no-such-gong"}"#, MeditationEdit(startGong: .set("no-such-gong")), "no-such-gong"),
        ]
        for c in cases {
            let web = post(api, "/api/meditations/" + m.id, c.json)
            var cli: CoreError?
            do { try LibraryService(store: store).edit(m.id, c.edit) } catch { cli = error }
            #expect(web.status == 422 && web.text.contains("\"bad-arguments\"") && web.text.contains(c.says), "\(c.json): \(web)")
            #expect(cli?.category == .badInput && cli?.description.contains(c.says) == true, "\(c.json): \(String(describing: cli))")
        }
        #expect(try store.find(m.id) == m, "nothing was changed")
        let unknown = post(api, "/api/meditations/" + m.id, #"{"nmae":"x"}"#)
        #expect(unknown.status == 422 && unknown.text.contains("nmae") && unknown.text.contains("trimStart"))
        let good = post(api, "/api/meditations/" + m.id, #"{"name":"Body scan","album":null,"trimStart":500}"#)
        #expect(good.status == 200 && good.text.contains("\"trimStart\":500") && good.text.contains("\"name\":\"Body scan\""))
    }

    @Test("pairing refuses a field it does not take, naming it")
    func pairingStrict() throws {
        let home = NSTemporaryDirectory() + "sm-onerule-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: home) }
        WebRegistration.register()   // before the catalog is opened, as main does
        let api = WebAPI(store: try LibraryStore(home: home), secure: false, log: Logger(label: "test"))
        let r = post(api, "/api/pair", #"{"pin":"123456","nmae":"phone"}"#)
        #expect(r.status == 422 && r.text.contains("nmae"))
    }
}
