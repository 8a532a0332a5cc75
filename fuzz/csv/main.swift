// libFuzzer harness for the practice log's CSV import (Sources/StillMomentCore/Domain/
// PracticeExport.swift: `history import FILE`, compiled with the Core files it uses). Any
// bytes, read as UTF-8 text the way the import reads a file, go to PracticeExport.parseCSV
// (RFC 4180: quotes, doubled quotes, line breaks in quoted fields, CR LF / LF / CR, a BOM)
// and to PracticeExport.read (the header, the field count, each entry's checks,
// SpreadsheetCell's restoring of `'`-prefixed cells). A refusal must be an ImportError that
// names a line ≥ 1 in one line of text, in both languages. What parses must write back:
// the rows, quoted as the export quotes, read as the same rows; the entries, exported
// again (`PracticeExport.csv` and `.json`), read as the same entries. Nothing may trap or
// hang.

import Foundation

@inline(never)
func consume<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

/// The rows as the export writes them (each field quoted when it must be, CR LF after each).
func written(_ rows: [[String]]) -> String {
    rows.map { $0.map(PracticeExport.quote).joined(separator: ",") + "\r\n" }.joined()
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    let text = String(decoding: bytes, as: UTF8.self)

    // 1. The RFC 4180 reader alone.
    do {
        let rows = try PracticeExport.parseCSV(text)
        precondition(!rows.contains { $0.isEmpty }, "an empty row")
        // Written back and read again: the same rows (a BOM at the very start would be taken
        // for the file's own, so that one case is left out).
        if rows.first?.first?.unicodeScalars.first != "\u{FEFF}" {
            let again = try? PracticeExport.parseCSV(written(rows))
            precondition(again == rows, "rows changed on their way back: \(rows) -> \(again.map { "\($0)" } ?? "a refusal")")
        }
        for row in rows { for cell in row { consume(SpreadsheetCell.restored(cell)) } }
    } catch {
        checkRefusal(error)
    }

    // 2. The whole import (fuzz/common/Practice.swift).
    importChecked(text)
    return 0
}
