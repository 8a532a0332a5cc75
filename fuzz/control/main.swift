// libFuzzer target: the control protocol's framing, JSON reader and message decoder (what a
// daemon reads from any local client). Arbitrary bytes go through LineFramer and every line
// is decoded before and after the hello; the whole input is also read as one JSON text,
// as it is and wrapped in up to 63 arrays.
// Nothing may crash, hang or grow without bound; what is read nests at most 32 deep, is
// written back as a line that reads as the same value, goes through the Codable coders
// (JSONValueEncoder/JSONValueDecoder, strict) unchanged, and equals what Foundation's decoder
// (through JSON's Codable conformance, depth-limited the same way) makes of it.
import FoundationEssentials

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    var framer = LineFramer(limit: 4096)
    // Feed in two pieces so that a line split across reads is exercised too.
    let cut = size / 3
    var items = framer.feed(bytes[0..<cut])
    items += framer.feed(bytes[cut...])
    // Each distinct refusal's answer is written once per input (an input of many lines
    // repeats a few refusals many times, and writing their words is most of a run's time).
    var answered = Set<String>()
    for item in items {
        guard case .line(let line) = item else { continue }
        for hello in [false, true] {
            do {
                let message = try ClientMessage.decode(line, helloDone: hello)
                if case .request(_, _, let args) = message { _ = JSON.object(args).line }
            } catch {
                // A refusal is one line, and a too-deep message is a bad request.
                precondition(!error.words.en.contains("\n") && !error.words.de.contains("\n"), "a refusal of more than one line")
                let key = "\(error.code.rawValue)\u{0}\(error.words.en)\u{0}\(error.words.de)\u{0}\(error.id ?? -1)\u{0}\(JSON.object(error.args).line)"
                guard answered.insert(key).inserted else { continue }
                for language in [Language.en, .de] {
                    let answer = error.answer(language)
                    let line = answer.line
                    precondition(!line.contains("\n"), "an answer of more than one line")
                    precondition((try? JSONParser.parse(Array(line.utf8))) == answer, "an answer does not read back: \(line)")
                }
            }
        }
    }
    readWhole(Array(bytes))
    // The same text wrapped in 0-63 arrays (the first byte says how many), so the depth
    // limit is met from both sides whatever the corpus holds.
    if let first = bytes.first {
        let n = Int(first & 63)
        readWhole([UInt8](repeating: UInt8(ascii: "["), count: n) + bytes.dropFirst() + [UInt8](repeating: UInt8(ascii: "]"), count: n))
    }
    return 0
}

/// A typed shape for the strict decoder to try every input against.
struct Probe: Decodable {
    enum Mode: String, Decodable { case a, b }
    var id: Int64
    var by: Double?
    var name: String?
    var on: Bool?
    var mode: Mode?
    var items: [UInt8]?
    var nested: [String: Probe]?
}

/// How deep arrays and objects nest in a value (a leaf is 0).
func depth(_ value: JSON) -> Int {
    switch value {
    case .array(let a): return 1 + (a.map(depth).max() ?? 0)
    case .object(let o): return 1 + (o.values.map(depth).max() ?? 0)
    default: return 0
    }
}

func readWhole(_ bytes: [UInt8]) {
    let parsed: JSON
    do {
        parsed = try JSONParser.parse(bytes)
    } catch {
        precondition(!error.description.contains("\n"), "a parse error of more than one line")
        return
    }
    precondition(depth(parsed) <= JSONParser.maxDepth, "a value nested deeper than the limit was read")
    // Written back and read again: the same value.
    let line = parsed.line
    precondition(!line.contains("\n"), "a value written on more than one line")
    guard let again = try? JSONParser.parse(Array(line.utf8)) else { preconditionFailure("a value written back does not read: \(line)") }
    precondition(again == parsed, "a value changed on its way back: \(line)")
    // Through the Codable coders: the same value out, and a strict typed read that refuses
    // or reads without crashing whatever the shape.
    precondition((try? JSONValueEncoder.encode(parsed)) == parsed, "the encoder changed a value")
    precondition((try? JSONValueDecoder.decode(JSON.self, from: parsed, strict: true)) == parsed, "the decoder changed a value")
    _ = try? JSONValueDecoder.decode(Probe.self, from: parsed, strict: true)
    _ = try? JSONValueDecoder.decode([String: [Int64]].self, from: parsed, strict: true)
    // Foundation's reader, where it accepts the text too, reads the same value.
    if let other = try? JSONDecoder().decode(JSON.self, from: Data(bytes)) {
        precondition(other == parsed, "Foundation reads another value")
    }
}
