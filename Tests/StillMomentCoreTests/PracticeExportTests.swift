/// The practice log's CSV and JSON import/export at the edges: cells a spreadsheet would
/// take for a formula are neutralised and restored exactly (a property over random names),
/// and an import refuses values that are not ours, naming the line or record.
import Foundation
import PropertyBased
import Testing
@testable import StillMomentCore

@Suite("Practice export")
struct PracticeExportTests {
    /// Names made mostly of the characters that matter: quotes, formula starters, CSV syntax,
    /// and a combining mark (after a quote it makes one Character of the two).
    static let alphabet: [String] = ["'", "'", "'", "'", "=", "=", "+", "-", "@", "\t", "\r", "\n", ",", "\"", "a", "b", " ", "Ü", "😀",
                                     "\u{301}"]
    static let names = Gen.int(in: 0...(alphabet.count - 1)).array(of: 0...8).map { $0.map { alphabet[$0] }.joined() }

    @Test("no CSV cell starts a formula, and every name reads back exactly (random names)")
    func formulaCells() async throws {
        let triggers: Set<Character> = ["=", "+", "-", "@", "\t", "\r"]
        await propertyCheck(count: 3000, input: Self.names, Self.names) { teacher, raw in
            let name = raw.isEmpty ? "=" : raw
            let cell = SpreadsheetCell.neutralised(name)
            #expect(!triggers.contains(cell.first ?? " "), "\(cell.debugDescription)")
            #expect(SpreadsheetCell.restored(cell) == name)
            // The same for a cell not written by us: restoring never changes a cell that
            // `neutralised` could not have produced from something else.
            #expect(SpreadsheetCell.neutralised(SpreadsheetCell.restored(name)) == name
                    || SpreadsheetCell.restored(name) == name)
            var e = PracticeTests.entry("2026-11-24T07:00:00+01:00", minutes: 3, preset: name, teacher: teacher.isEmpty ? nil : teacher)
            e.name = name
            let csv = PracticeExport.csv([e])
            let back = try? PracticeExport.read(csv)
            #expect(back == [e], "\(csv.debugDescription)")
        }
        // fuzz/csv's finding: a quote with a combining mark after it was not doubled, the
        // field ended there, and "=1+1" came out as a cell of its own.
        var e = PracticeTests.entry("2026-11-24T07:00:00+01:00", minutes: 3, preset: nil, teacher: nil)
        e.name = "a\"\u{301},=1+1"
        let csv = PracticeExport.csv([e])
        let cells = try PracticeExport.parseCSV(csv).flatMap { $0 }
        #expect(!cells.contains(where: { $0.hasPrefix("=") }), "\(csv.debugDescription)")
        #expect(try PracticeExport.read(csv) == [e])
        #expect(SpreadsheetCell.neutralised("=HYPERLINK(\"x\")") == "'=HYPERLINK(\"x\")")
        #expect(SpreadsheetCell.neutralised("'=x") == "''=x" && SpreadsheetCell.restored("''=x") == "'=x")
        #expect(SpreadsheetCell.neutralised("'plain") == "'plain" && SpreadsheetCell.restored("'plain") == "'plain")
        #expect(SpreadsheetCell.neutralised("'") == "'" && SpreadsheetCell.neutralised("a=b") == "a=b")
    }

    @Test("import refuses a scheduled that is not true or false and the year 0000, naming the line or record")
    func strictImport() throws {
        let e = PracticeTests.entry("2026-11-24T07:00:00+01:00", minutes: 20)
        let csv = PracticeExport.csv([e, PracticeTests.entry("2026-11-25T07:00:00+01:00", minutes: 5)])
        for value in ["maybe", "2", "", "TRUE", "1"] {
            var lines = csv.components(separatedBy: "\r\n")
            lines[2] = lines[2].replacingOccurrences(of: ",false", with: "," + value)
            #expect {
                try PracticeExport.read(lines.joined(separator: "\r\n"))
            } throws: { error in
                guard let e = error as? PracticeExport.ImportError else { return false }
                return e.line == 3 && e.words.en == (value.isEmpty ? "scheduled is missing" : "scheduled '\(value)' is not true or false")
            }
        }
        #expect(throws: PracticeExport.ImportError.self) {
            try PracticeExport.read(csv.replacingOccurrences(of: "2026-11-25T", with: "0000-11-25T"))
        }
        let json = JSON.array(PracticeExport.json([e, e]).map(JSON.object)).line
        for value: JSON in [.string("maybe"), .number(2), .null, .string("true"), .object([:])] {
            var objects = PracticeExport.json([e, e])
            objects[1]["scheduled"] = value
            let bad = JSON.array(objects.map(JSON.object)).line
            do {
                _ = try PracticeExport.read(bad)
                Issue.record("\(value) was accepted")
            } catch {
                // A value that is no leaf makes the file no export at all.
                let nested = value == .object([:])
                #expect(nested ? error.line == 1 && !error.isRecord : error.isRecord && error.line == 2 && error.description.hasPrefix("record 2: scheduled"), "\(error)")
            }
        }
        do {
            _ = try PracticeExport.read(json.replacingOccurrences(of: "2026-11-24T07", with: "0000-01-01T07"))
            Issue.record("the year 0000 was accepted")
        } catch {
            #expect(error.isRecord && error.line == 1 && error.reason.contains("0000"), "\(error)")
        }
        #expect(try PracticeExport.read(json).count == 2)
    }
}
