import StillMomentCore
import Testing
@testable import StillMomentControl

@Suite("Control protocol")
struct ProtocolTests {
    func decode(_ s: String, hello: Bool = true) throws(ProtocolError) -> ClientMessage {
        try ClientMessage.decode(Array(s.utf8), helloDone: hello)
    }

    @Test("a client that agreed version 2 may still send keys a message does not take; from 3 on they are refused, named")
    func strictFromVersion3() throws {
        let line = Array(#"{"id":6,"command":"status","trace":true}"#.utf8)
        #expect(try ClientMessage.decode(line, helloDone: true, version: 2) == .request(id: 6, command: .status, args: [:]))
        #expect(try decode(#"{"hello":{"version":2,"langauge":"de"}}"#, hello: false) == .hello(version: 2, client: "", language: nil))
        do {
            _ = try ClientMessage.decode(line, helloDone: true, version: 3)
            Issue.record("an unknown key was accepted")
        } catch {
            #expect(error.code == .badRequest && error.id == 6 && error.message.contains("'trace'") && error.message.contains("args, command, id"))
            // For programs: the key and what the message takes, beside the words in both languages.
            let answer = error.answer(.de)["error"]
            #expect(answer?["args"] == .object(["key": .string("trace"), "takes": .array([.string("args"), .string("command"), .string("id")])]))
            #expect(answer?["words"]?["en"]?.string?.hasPrefix("unknown key 'trace'") == true)
            #expect(answer?["message"]?.string?.hasPrefix("unbekannter Schlüssel 'trace'") == true)
        }
    }

    @Test("every request decodes into its typed form and goes back to the same wire")
    func typedRequests() throws {
        let requests: [Request] = [.status, .pause, .resume, .stop, .finish, .reschedule, .unsubscribe,
                                   .seek(.by(-15_000)), .seek(.to(60_000, at: 123)), .ringNow(id: 4),
                                   .subscribe(progress: true), .subscribe(progress: false),
                                   .timer(TimerStartRequest(preset: "morning", options: ["duration": "20m"])),
                                   .play(PlayRequest(id: "abc", from: 1000, preparation: 5000, resume: true))]
        for r in requests {
            #expect(try Request(r.command, args: r.args) == r, "\(r)")
            // Through the line a client writes and the daemon reads.
            let line = JSON.object(["id": .number(1), "command": .string(r.command.rawValue), "args": .object(r.args)]).line
            guard case .request(_, let command, let args) = try decode(line) else { Issue.record("not a request"); continue }
            #expect(try Request(command, args: args) == r)
        }
    }

    @Test("hello, then requests with ids and arguments")
    func good() throws {
        #expect(try decode(#"{"hello":{"version":1,"client":"x"}}"#, hello: false) == .hello(version: 1, client: "x", language: nil))
        #expect(try decode(#"{"id":7,"command":"status"}"#) == .request(id: 7, command: .status, args: [:]))
        #expect(try decode(#"{"id":8,"command":"seek","args":{"by":-15}}"#) == .request(id: 8, command: .seek, args: ["by": .number(-15)]))
    }

    @Test("every bad message has a typed error (and the id when there is one)",
          arguments: [
            (#"{"id":1,"command":"status"}"#, false, ProtocolError.Code.notHello, nil as Int?),
            (#"{"hello":{"version":0}}"#, false, .badVersion, nil),
            (#"{"hello":{}}"#, false, .badRequest, nil),
            ("not json", true, .malformed, nil),
            (#"{"id":1,"command":"status""#, true, .malformed, nil),
            ("[1,2]", true, .malformed, nil),
            (#"{"command":"status"}"#, true, .badRequest, nil),
            (#"{"id":1.5,"command":"status"}"#, true, .badRequest, nil),
            (#"{"id":3}"#, true, .badRequest, 3),
            (#"{"id":4,"command":"dance"}"#, true, .unknownCommand, 4),
            (#"{"id":5,"command":"seek","args":[1]}"#, true, .badArguments, 5),
            // Version 3 reads the message itself strictly.
            (#"{"id":6,"command":"status","arg":{}}"#, true, .badRequest, 6),
            (#"{"hello":{"version":3,"langauge":"de"}}"#, false, .badRequest, nil),
            (#"{"hello":{"version":3},"id":1}"#, false, .badRequest, nil),
          ])
    func bad(_ text: String, _ hello: Bool, _ code: ProtocolError.Code, _ id: Int?) {
        do {
            _ = try decode(text, hello: hello)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.code == code, "\(text): \(error)")
            #expect(error.id == id)
            #expect(error.answer(.en)["error"]?["code"]?.string == code.rawValue)
        }
    }

    @Test("lines are split, and one over 64 KiB is refused without being kept")
    func framing() throws {
        var f = LineFramer()
        #expect(f.feed(Array("a\nb".utf8)) == [.line(Array("a".utf8))])
        #expect(f.feed(Array("c\r\n".utf8)) == [.line(Array("bc".utf8))])
        let big = [UInt8](repeating: 0x41, count: 70_000) + [0x0A] + Array("ok\n".utf8)
        #expect(f.feed(big) == [.tooLong, .line(Array("ok".utf8))])
        // Fed a byte at a time, the same.
        var g = LineFramer(limit: 4)
        var items: [LineFramer.Item] = []
        for b in Array("12345\nab\n".utf8) { items += g.feed([b]) }
        #expect(items == [.tooLong, .line(Array("ab".utf8))])
    }
}
