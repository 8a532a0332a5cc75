/// The practice log as CSV (RFC 4180, UTF-8, with a header line) and as JSON, both ways,
/// so a log moves to a new Pi: `history --csv` / `--json` and `history import FILE`.
///
/// CSV columns: id, kind (timer | guided), name, teacher, preset, meditation_id,
/// start (ISO 8601 with the UTC offset in force then), planned_seconds, heard_seconds
/// (decimal, to the millisecond), end_reason (completed | finished | stopped | replaced |
/// preempted | failed), scheduled (true | false). A cell that would start a spreadsheet
/// formula is written with a leading `'` (SpreadsheetCell) and read back without it.
import FoundationEssentials

public enum PracticeExport {
    public static let columns = ["id", "kind", "name", "teacher", "preset", "meditation_id", "start",
                                 "planned_seconds", "heard_seconds", "end_reason", "scheduled"]

    public static func csv(_ entries: [PracticeEntry]) -> String {
        var out = csvHeader
        for e in entries { out += csvLine(e) }
        return out
    }

    public static let csvHeader = columns.joined(separator: ",") + "\r\n"

    /// One entry's line. A cell that a spreadsheet would take for a formula is prefixed
    /// with `'` (SpreadsheetCell); `read` takes it off again.
    public static func csvLine(_ e: PracticeEntry) -> String {
        let fields = [e.id, e.kind.rawValue, e.name, e.teacher ?? "", e.preset ?? "", e.meditationID ?? "",
                      e.start.iso8601, seconds(e.plannedMilliseconds), seconds(e.heardMilliseconds), e.endReason,
                      e.scheduled ? "true" : "false"]
        return fields.map { quote(SpreadsheetCell.neutralised($0)) }.joined(separator: ",") + "\r\n"
    }

    /// One JSON object per entry, in an array (times in ISO 8601 and seconds).
    public static func json(_ entries: [PracticeEntry]) -> [[String: JSON]] {
        entries.map(json)
    }

    public static func json(_ e: PracticeEntry) -> [String: JSON] {
            [
                "id": .string(e.id), "kind": .string(e.kind.rawValue), "name": .string(e.name),
                "teacher": e.teacher.map(JSON.string) ?? .null, "preset": e.preset.map(JSON.string) ?? .null,
                "meditationId": e.meditationID.map(JSON.string) ?? .null, "start": .string(e.start.iso8601),
                "plannedSeconds": .number(Double(e.plannedMilliseconds) / 1000),
                "heardSeconds": .number(Double(e.heardMilliseconds) / 1000),
                "endReason": .string(e.endReason), "scheduled": .bool(e.scheduled),
            ]
    }

    /// What an import refuses, and where: a CSV file's line or a JSON array's record
    /// (counted from 1).
    public struct ImportError: Error, Sendable, Equatable, CustomStringConvertible {
        public let line: Int
        public let words: LocalizedText
        public var isRecord = false
        public init(line: Int, reason: LocalizedText, isRecord: Bool = false) {
            self.line = line
            self.words = reason
            self.isRecord = isRecord
        }
        /// The reason in this process's language.
        public var reason: String { words.text() }
        public var description: String { text(.current) }
        public func text(_ language: Language) -> String {
            (isRecord ? tr("record \(line)", "Datensatz \(line)", language) : tr("line \(line)", "Zeile \(line)", language)) + ": \(words.text(language))"
        }
    }

    /// Reads our own CSV or JSON export back (the first non-blank character decides).
    public static func read(_ text: String) throws(ImportError) -> [PracticeEntry] {
        let trimmed = text.trimmingWhitespace()
        if trimmed.hasPrefix("[") {
            // Each record an object of leaves (a text, a number, true or false, null).
            let objects: [[String: JSON]]
            do {
                objects = try JSON.decode([[String: JSON]].self, from: trimmed.utf8)
                guard objects.allSatisfy({ $0.values.allSatisfy(\.isLeaf) }) else { throw JSONValueDecoder.Failure(path: [], reason: .wrongType(expected: .object)) }
            } catch {
                throw ImportError(line: 1, reason: both("not a JSON array of practice entries", "kein JSON-Array von Übungseinträgen"))
            }
            return try objects.enumerated().map { (i, o) throws(ImportError) in
                // `scheduled` is a JSON boolean; any other value is shown as it was given.
                let scheduled: String? = switch o["scheduled"] {
                case .bool(let b)?: b ? "true" : "false"
                case .string(let s)?: "\"\(s)\""
                case .number(let n)?: n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
                case .null?, .array?, .object?, nil: nil
                }
                do throws(ImportError) { return try entry(from: { o[$0]?.text }, scheduled: scheduled, line: i + 1) } catch {
                    throw ImportError(line: error.line, reason: error.words, isRecord: true)
                }
            }
        }
        let rows = try parseCSV(text)
        guard let header = rows.first, header == columns else {
            throw ImportError(line: 1, reason: both("the header is not \(columns.joined(separator: ","))",
                                                  "die Kopfzeile ist nicht \(columns.joined(separator: ","))"))
        }
        return try rows.dropFirst().enumerated().map { (i, row) throws(ImportError) in
            guard row.count == columns.count else {
                throw ImportError(line: i + 2, reason: both("\(row.count) fields, \(columns.count) expected",
                                                          "\(row.count) Felder, \(columns.count) erwartet"))
            }
            let byName = Dictionary(uniqueKeysWithValues: zip(columns, row.map(SpreadsheetCell.restored)))
            return try entry(from: { key in
                let csvKey = ["meditationId": "meditation_id", "plannedSeconds": "planned_seconds",
                              "heardSeconds": "heard_seconds", "endReason": "end_reason"][key] ?? key
                let v = byName[csvKey]
                return v?.isEmpty == true ? nil : v
            }, scheduled: byName["scheduled"].flatMap { $0.isEmpty ? nil : $0 }, line: i + 2)
        }
    }

    /// One entry from its fields (`field` gives a non-empty text or nil), checked.
    /// `scheduled` must be exactly `true` or `false`; the start's local year 1 to 9999.
    static func entry(from field: (String) -> String?, scheduled: String?, line: Int) throws(ImportError) -> PracticeEntry {
        func fail(_ en: String, _ de: String) -> ImportError { ImportError(line: line, reason: both(en, de)) }
        func need(_ key: String) throws(ImportError) -> String {
            guard let v = field(key), !v.isEmpty else { throw fail("\(key) is missing", "\(key) fehlt") }
            return v
        }
        func ms(_ key: String) throws(ImportError) -> Int64 {
            let text = try need(key)
            guard let v = TimeText.decimal(Substring(text)), v <= Double(TimeText.maximum) / 1000 else {
                throw fail("\(key) '\(Display.clean(text))' is not a number of seconds",
                           "\(key) '\(Display.clean(text))' ist keine Zahl von Sekunden")
            }
            return Int64((v * 1000).rounded())
        }
        let id = try need("id").lowercased()
        guard StoredName.isUUID(Substring(id)) else {
            throw fail("id '\(Display.clean(id))' is not a UUID", "id '\(Display.clean(id))' ist keine UUID")
        }
        guard let kind = SessionKind(rawValue: try need("kind")), kind.isPractice else {
            throw fail("kind must be timer or guided", "kind muss timer oder guided sein")
        }
        let startText = try need("start")
        guard let start = LocalTime(iso8601: startText) else {
            throw fail("start is not an ISO 8601 time with its offset", "start ist keine ISO-8601-Zeit mit ihrem Versatz")
        }
        guard start.date.year >= 1 else {
            throw fail("start '\(Display.clean(startText))' is in the year 0000; years run from 0001",
                       "start '\(Display.clean(startText))' liegt im Jahr 0000; Jahre zählen ab 0001")
        }
        let reason = try need("endReason")
        guard ["completed", "finished", "stopped", "replaced", "preempted", "failed"].contains(reason) else {
            throw fail("end reason '\(Display.clean(reason))' is not one of ours", "Endgrund '\(Display.clean(reason))' ist keiner von unseren")
        }
        let name = try need("name")
        guard name.count <= 500 else { throw fail("the name is too long", "der Name ist zu lang") }
        guard let scheduled else { throw fail("scheduled is missing", "scheduled fehlt") }
        guard scheduled == "true" || scheduled == "false" else {
            let shown = Display.clean(String(scheduled.prefix(40)))
            throw fail("scheduled '\(shown)' is not true or false", "scheduled '\(shown)' ist nicht true oder false")
        }
        // An empty text is no value, whichever format it came in (a CSV cell cannot tell ""
        // from none, so a JSON "" read as a value did not survive an export to CSV: fuzz/json).
        func optional(_ key: String) -> String? { field(key).flatMap { $0.isEmpty ? nil : $0 } }
        return PracticeEntry(id: id, kind: kind, name: name, meditationID: optional("meditationId"), teacher: optional("teacher"),
                             preset: optional("preset"), start: start, plannedMilliseconds: try ms("plannedSeconds"),
                             heardMilliseconds: try ms("heardSeconds"), endReason: reason, scheduled: scheduled == "true")
    }

    static func seconds(_ ms: Int64) -> String {
        let whole = ms / 1000, frac = ms % 1000
        if frac == 0 { return "\(whole)" }
        var f = String(frac)
        f = String(repeating: "0", count: 3 - f.count) + f
        while f.hasSuffix("0") { f.removeLast() }
        return "\(whole).\(f)"
    }

    static func quote(_ field: String) -> String {
        // By scalar: "\r\n" is one Character, equal neither to "\r" nor to "\n".
        guard field.unicodeScalars.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return field }
        // Doubled by scalar too: a quote followed by a combining mark is one Character, and a
        // search by Characters left it single, so the field ended early and what followed
        // (a cell starting with "=") escaped the formula guard (found by fuzz/csv).
        var out = String.UnicodeScalarView()
        for scalar in field.unicodeScalars {
            if scalar == "\"" { out.append("\"") }
            out.append(scalar)
        }
        return "\"" + String(out) + "\""
    }

    /// RFC 4180: quoted fields may hold commas, quotes (doubled) and line breaks.
    static func parseCSV(_ text: String) throws(ImportError) -> [[String]] {
        var rows: [[String]] = []
        var row: [String] = []
        var field = ""
        var quoted = false
        var line = 1
        var chars = Array(text.unicodeScalars)[...]
        if chars.first == "\u{FEFF}" { chars = chars.dropFirst() }
        var i = chars.startIndex
        while i < chars.endIndex {
            let c = chars[i]
            if quoted {
                if c == "\"" {
                    if i + 1 < chars.endIndex && chars[i + 1] == "\"" {
                        field.unicodeScalars.append("\"")
                        i += 1
                    } else {
                        quoted = false
                    }
                } else {
                    if c == "\n" { line += 1 }
                    field.unicodeScalars.append(c)
                }
            } else if c == "\"" && field.isEmpty {
                quoted = true
            } else if c == "," {
                row.append(field)
                field = ""
            } else if c == "\n" || c == "\r" {
                if c == "\r" && i + 1 < chars.endIndex && chars[i + 1] == "\n" { i += 1 }
                row.append(field)
                field = ""
                if !(row.count == 1 && row[0].isEmpty) { rows.append(row) }
                row = []
                line += 1
            } else {
                field.unicodeScalars.append(c)
            }
            i += 1
        }
        if quoted { throw ImportError(line: line, reason: both("a quoted field is not closed", "ein Feld in Anführungszeichen ist nicht geschlossen")) }
        if !field.isEmpty || !row.isEmpty {
            row.append(field)
            rows.append(row)
        }
        return rows
    }
}

extension JSON {
    var isLeaf: Bool {
        switch self {
        case .array, .object: return false
        default: return true
        }
    }

    /// A leaf as the text a CSV cell would hold.
    var text: String? {
        switch self {
        case .string(let s): return s
        case .number(let n): return String(n)
        case .bool(let b): return b ? "true" : "false"
        default: return nil
        }
    }
}
