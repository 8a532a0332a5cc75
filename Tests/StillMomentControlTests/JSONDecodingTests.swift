/// JSON's Codable decoding (for whoever reads a JSON value with a Decoder): the same values
/// as the socket's reader, nesting limited to 32 like it, and hostile shapes in linear time.
import StillMomentCore
import Foundation
import Testing
@testable import StillMomentControl

@Suite("JSON through Codable")
struct JSONDecodingTests {
    static func decode(_ text: String) throws -> JSON {
        try JSONDecoder().decode(JSON.self, from: Data(text.utf8))
    }

    static func seconds(_ body: () throws -> Void) rethrows -> Double {
        let t0 = ContinuousClock.now
        try body()
        let d = ContinuousClock.now - t0
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    static func nested(_ depth: Int, open: String, close: String, leaf: String = "1") -> String {
        String(repeating: open, count: depth) + leaf + String(repeating: close, count: depth)
    }

    @Test("every kind of value, as the reader reads it")
    func kinds() throws {
        let text = #"{"a":[1,-2.5e3,"x\u00e9\n",true,false,null,{}],"b":{"c":[[]]},"d":""}"#
        #expect(try Self.decode(text) == (try JSONParser.parse(Array(text.utf8))))
        #expect(try Self.decode("null") == .null)
        #expect(try Self.decode("\"s\"") == .string("s"))
        #expect(try Self.decode("0.5") == .number(0.5))
        #expect(try Self.decode("true") == .bool(true))
    }

    @Test("a number too large for a Double is refused by both readers, not read as infinity")
    func range() throws {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(Array("1e400".utf8)) }
        #expect(throws: JSONParseError.self) { try JSONParser.parse(Array("[-1e400]".utf8)) }
        #expect(throws: DecodingError.self) { try Self.decode("[1e400]") }
        #expect(try JSONParser.parse(Array("[1e308,-1e-400]".utf8)) == .array([.number(1e308), .number(-0.0)]))
    }

    @Test("a key given twice is refused (readers disagree on which one counts)")
    func duplicates() {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(Array(#"{"a":1,"a":2}"#.utf8)) }
        #expect(throws: ProtocolError.self) { try ClientMessage.decode(Array(#"{"id":1,"id":2,"command":"status"}"#.utf8), helloDone: true) }
    }

    @Test("32 deep is read, 33 deep is refused, in arrays and in objects alike")
    func depth() throws {
        for (open, close) in [("[", "]"), ("{\"k\":", "}"), ("[1,", "]")] {
            let ok = Self.nested(32, open: open, close: close)
            #expect(try Self.decode(ok) == (try JSONParser.parse(Array(ok.utf8))), "\(open)")
            #expect(throws: DecodingError.self, "\(open)") { try Self.decode(Self.nested(33, open: open, close: close)) }
            #expect(throws: JSONParseError.self, "\(open)") { try JSONParser.parse(Array(Self.nested(33, open: open, close: close).utf8)) }
        }
    }

    @Test("the attack line (31 values nested 510 deep, 63 KB) is refused at once; wide input reads in linear time")
    func hostile() throws {
        let attack = "[" + Array(repeating: Self.nested(510, open: "[1,", close: "]"), count: 31).joined(separator: ",") + "]"
        #expect(attack.utf8.count > 60_000)
        // Was 37 s in a release build (about 14 s here for 400 deep in a debug build).
        let refused = Self.seconds { #expect(throws: DecodingError.self) { try Self.decode(attack) } }
        #expect(refused < 2, "\(refused) s")
        // Wide and nearly as deep as allowed: four times the input takes about four times
        // as long (the bound is generous: quadratic would be 16x).
        func wide(_ n: Int) -> String { "[" + Array(repeating: Self.nested(30, open: "[1,", close: "]"), count: n).joined(separator: ",") + "]" }
        let small = wide(100), large = wide(400)
        var best = (Double.infinity, Double.infinity)
        for _ in 0..<2 {
            best.0 = min(best.0, try Self.seconds { _ = try Self.decode(small) })
            best.1 = min(best.1, try Self.seconds { _ = try Self.decode(large) })
        }
        #expect(best.1 < best.0 * 8, "100 values: \(best.0) s, 400 values: \(best.1) s")
        guard case .array(let a) = try Self.decode(large) else {
            Issue.record("not an array")
            return
        }
        #expect(a.count == 400)
    }
}
