// libFuzzer harness for the JSON importers: Core's JSONParser and the strict
// JSONValueDecoder on the typed values that files are read as (Sources/StillMomentCore/JSON/
// and Domain/PracticeExport.swift, compiled with the Core files they use). Any bytes go to
// JSONParser.parse; what parses is decoded, strictly and not, as the practice log's import
// reads it (`[[String: JSON]]`), as settings.json is read (`[String: String]`), as
// sounds.json is read (`[Sound]`), and as a PracticeEntry, a LocalTime and a CivilDate
// (Codable values with their own checks). The same text goes to PracticeExport.read, the
// `history import` of a JSON export (and, when it does not start with `[`, wrapped in
// `[…]`, so the record checks see every object): a refusal is an ImportError naming a
// record ≥ 1 in one line; what imports, exported again (JSON and CSV), imports as the same
// entries. A parse refusal is one line; a parsed value nests at most JSONParser.maxDepth
// deep and, written back as a line, reads as the same value. Nothing may trap or hang.

import Foundation

@inline(never)
func consume<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

/// How deep arrays and objects nest in a value (a leaf is 0).
func depth(_ value: JSON) -> Int {
    switch value {
    case .array(let a): return 1 + (a.map(depth).max() ?? 0)
    case .object(let o): return 1 + (o.values.map(depth).max() ?? 0)
    default: return 0
    }
}

/// Decodes `value` as `T`, strictly and not; a refusal must render in one line, and a
/// strict success must also be a lenient one (strictness only refuses more).
func typed<T: Decodable & Equatable>(_ type: T.Type, _ value: JSON) {
    var strict: T?
    do {
        strict = try JSONValueDecoder.decode(type, from: value, strict: true)
    } catch {
        precondition(!error.description.contains("\n"), "a decoder refusal of more than one line: \(error.description.debugDescription)")
    }
    let lenient = try? JSONValueDecoder.decode(type, from: value, strict: false)
    if let strict { precondition(lenient == strict, "a strict read that the lenient read refuses or reads otherwise") }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []

    // 1. The reader, and the typed reads of what it reads.
    do {
        let value = try JSONParser.parse(bytes)
        precondition(depth(value) <= JSONParser.maxDepth, "a value nested deeper than the limit was read")
        let line = value.line
        precondition(!line.contains("\n"), "a value written on more than one line")
        guard let again = try? JSONParser.parse(Array(line.utf8)) else { preconditionFailure("a value written back does not read: \(line)") }
        precondition(again == value, "a value changed on its way back: \(line)")
        typed([[String: JSON]].self, value)
        typed([String: String].self, value)
        typed([Sound].self, value)
        typed(PracticeEntry.self, value)
        typed([PracticeEntry].self, value)
        typed(LocalTime.self, value)
        typed(CivilDate.self, value)
        typed(LocalizedText.self, value)
        // The files' own calls (parse and decode in one).
        consume(try? JSON.decode([String: String].self, from: bytes))
        consume(try? JSON.decode([Sound].self, from: bytes))
    } catch {
        precondition(!error.description.contains("\n"), "a parse error of more than one line: \(error.description.debugDescription)")
    }

    // 2. The practice log's import, on the text as it is and as one array.
    let text = String(decoding: bytes, as: UTF8.self)
    importChecked(text)
    if !text.trimmingWhitespace().hasPrefix("[") { importChecked("[" + text + "]") }
    return 0
}
