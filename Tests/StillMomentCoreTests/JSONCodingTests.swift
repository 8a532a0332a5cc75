/// The one JSON stack: Codable values through JSONValueEncoder/JSONValueDecoder and
/// JSONWriter, strict where a client speaks (unknown keys named, numbers range-checked).
import StillMomentCore
import Testing

private struct Probe: Codable, Equatable {
    enum Mode: String, Codable { case a, b }
    var name: String
    var count: Int64
    var ratio: Double?
    var mode: Mode
    var tags: [String]
    var nested: [String: Int]?
}

@Suite struct JSONCodingTests {
    @Test func aValueGoesOutAndComesBackTheSame() throws {
        let p = Probe(name: "Stille \"Zeit\"\n/ä", count: -9_007_199_254_740_991, ratio: 0.1, mode: .b, tags: ["x", ""], nested: ["k": 3])
        let json = JSON(encoding: p)
        #expect(json.line == #"{"count":-9007199254740991,"mode":"b","name":"Stille \"Zeit\"\n/ä","nested":{"k":3},"ratio":0.1,"tags":["x",""]}"#)
        #expect(try JSON.decode(Probe.self, from: json.line.utf8, strict: true) == p)
        // A nil optional is left out, not written as null.
        var q = p
        q.ratio = nil
        #expect(JSON(encoding: q)["ratio"] == nil)
    }

    @Test func theWriterEscapesControlCharactersAndKeepsNumbersExact() {
        #expect(JSON.string("\u{1}\t\u{7F}").line == #""\u0001\t\u007f""#)
        // Escapes between runs copied whole, at either end, and multi-byte characters kept.
        #expect(JSON.string("\"a\\b\r\nStille ä 🔔\u{1F}\"").line == #""\"a\\b\r\nStille ä 🔔\u001f\"""#)
        #expect(JSON.string("").line == #""""#)
        #expect(JSON.string("ä").line == "\"ä\"")
        #expect(JSON.number(1e300).line == "1e+300")
        #expect(JSON.number(-0.5).line == "-0.5")
        #expect(JSON.number(42).line == "42")
        #expect(JSON.object(["b": .null, "a": .array([])]).line == #"{"a":[],"b":null}"#)
        #expect(JSON.object(["a": .array([.bool(true)])]).pretty == "{\n  \"a\": [\n    true\n  ]\n}")
    }

    @Test func strictDecodingNamesAnUnknownKeyAndWhatIsKnown() {
        let line = #"{"name":"n","count":1,"mode":"a","tags":[],"colour":"red"}"#
        do {
            _ = try JSON.decode(Probe.self, from: line.utf8, strict: true)
            Issue.record("an unknown key was accepted")
        } catch {
            #expect(error.reason == .unknownKey("colour", known: ["count", "mode", "name", "nested", "ratio", "tags"]))
        }
        // Lenient (a client reading a newer daemon): the key is ignored.
        #expect((try? JSON.decode(Probe.self, from: line.utf8))?.name == "n")
        // Inside a nested object too.
        #expect(throws: JSONValueDecoder.Failure.self) {
            try JSON.decode([String: Probe].self, from: #"{"x":{"name":"n","count":1,"mode":"a","tags":[],"extra":1}}"#.utf8, strict: true)
        }
    }

    @Test func aRefusalIsOneLineWhateverTheInputHolds() {
        // fuzz/json's finding: an enum's raw value with a line break was quoted into the
        // refusal; a key with one as well.
        for line in [#"{"name":"n","count":1,"mode":"a\nb","tags":[]}"#, #"{"name":"n","count":1,"mode":"a","tags":[],"x\ny":1}"#] {
            do {
                _ = try JSON.decode(Probe.self, from: line.utf8, strict: true)
                Issue.record("accepted: \(line)")
            } catch {
                #expect(!error.description.contains("\n") && !error.description.contains("\r"), "\(error.description.debugDescription)")
            }
        }
    }

    @Test func aNumberMustFitItsTypeExactly() throws {
        for bad in ["1e300", "1.5", "9223372036854775808", "-1e19"] {
            let line = #"{"name":"n","count":\#(bad),"mode":"a","tags":[]}"#
            #expect(throws: JSONValueDecoder.Failure.self, "\(bad)") { try JSON.decode(Probe.self, from: line.utf8) }
        }
        #expect(throws: JSONValueDecoder.Failure.self) { try JSON.decode(UInt8.self, from: "256".utf8) }
        #expect(throws: JSONValueDecoder.Failure.self) { try JSON.decode(UInt.self, from: "-1".utf8) }
        #expect(try JSON.decode(Int64.self, from: "-12".utf8) == -12)
    }

    @Test func wrongShapesAreRefusedWithWhere() {
        do {
            _ = try JSON.decode(Probe.self, from: #"{"name":5,"count":1,"mode":"a","tags":[]}"#.utf8)
            Issue.record("a number was taken for a text")
        } catch {
            #expect(error.path == ["name"] && error.reason == .wrongType(expected: .text))
        }
        do {
            _ = try JSON.decode(Probe.self, from: #"{"name":"n","mode":"a","tags":[]}"#.utf8)
            Issue.record("a missing key was accepted")
        } catch {
            #expect(error.path == ["count"] && error.reason == .missing)
        }
        #expect(throws: JSONValueDecoder.Failure.self) { try JSON.decode(Probe.self, from: #"{"name":"n","count":1,"mode":"c","tags":[]}"#.utf8) }
        #expect(throws: JSONValueDecoder.Failure.self) { try JSON.decode(Probe.self, from: "[1,2".utf8) }
    }
}
