/// The control socket's JSON reader: the same values as Foundation's for any JSON, every
/// malformed or too-deep input refused in one line, and hostile shapes read in one pass.
import StillMomentCore
import Foundation
import PropertyBased
import Testing
@testable import StillMomentControl

@Suite("JSON reader")
struct JSONParserTests {
    /// Random JSON values (depth-limited) as text.
    static func text(_ seed: UInt64, depth: Int = 0) -> String {
        var g = seed
        func next() -> UInt64 {
            g = g &* 6364136223846793005 &+ 1442695040888963407
            return g >> 33
        }
        func value(_ d: Int) -> String {
            switch next() % (d > 4 ? 5 : 7) {
            case 0: return "true"
            case 1: return "null"
            case 2: return String(Double(Int(next() % 2_000_000)) / 8 - 100_000)
            case 3: return "\"a\\u00e9\\\"\\n\\ud83d\\ude00 \(next() % 100)\""
            case 4: return "false"
            case 5: return "[" + (0..<Int(next() % 4)).map { _ in value(d + 1) }.joined(separator: ",") + "]"
            default: return "{" + (0..<Int(next() % 4)).map { k in "\"k\(k)\": " + value(d + 1) }.joined(separator: ", ") + "}"
            }
        }
        return value(depth)
    }

    static func foundation(_ s: String) -> JSON? {
        try? JSONDecoder().decode(JSON.self, from: Data(s.utf8))
    }

    @Test("any JSON reads as Foundation reads it")
    func sameAsFoundation() async {
        await propertyCheck(count: 2000, input: Gen.uint64()) { seed in
            let s = Self.text(seed)
            #expect((try? JSONParser.parse(Array(s.utf8))) == Self.foundation(s), "\(s)")
        }
    }

    @Test("malformed input is refused, never trapped on")
    func malformed() {
        for bad in ["", "{", "[1,]", "{\"a\":}", "\"\\u12\"", "\"\\ud800\"", "01", "1.", "-", "tru", "{\"a\" 1}", "[1 2]",
                    "\"\u{1}\"", "1 2", "{\"a\":1,}", String(repeating: "9", count: 100)] {
            #expect(throws: JSONParseError.self, "\(bad)") { try JSONParser.parse(Array(bad.utf8)) }
        }
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0xFF, 0x22]) }
    }

    @Test("nesting is limited to 32 deep; the attack line (510 deep, 63 KB) is refused at once")
    func depth() throws {
        let ok = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        #expect(throws: Never.self) { try JSONParser.parse(Array(ok.utf8)) }
        let deep = String(repeating: "[", count: 33) + String(repeating: "]", count: 33)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(Array(deep.utf8)) }
        var attack = ""
        while attack.utf8.count < 63_000 { attack += String(repeating: "[1,", count: 510) + "1" + String(repeating: "]", count: 510) + "," }
        let line = "{\"id\":1,\"command\":\"status\",\"args\":[" + attack.dropLast() + "]}"
        do {
            _ = try ClientMessage.decode(Array(line.utf8), helloDone: true)
            Issue.record("a line nested 510 deep was accepted")
        } catch {
            #expect(error.code == .badRequest)
        }
        // Wide is fine: 10,000 values in one array read in one pass.
        let wide = "[" + Array(repeating: "1", count: 10_000).joined(separator: ",") + "]"
        guard case .array(let a) = try JSONParser.parse(Array(wide.utf8)) else {
            Issue.record("not an array")
            return
        }
        #expect(a.count == 10_000)
    }
}
