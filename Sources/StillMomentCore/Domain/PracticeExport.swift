/// The practice log as CSV (RFC 4180, UTF-8, with a header line) and as JSON, both ways,
/// so a log moves to a new Pi: `history --csv` / `--json` and `history import FILE`.
///
/// CSV columns: id, kind (timer | guided), name, teacher, preset, meditation_id,
/// start (ISO 8601 with the UTC offset in force then), planned_seconds, heard_seconds
/// (decimal, to the millisecond), end_reason (completed | finished | stopped | replaced |
/// preempted | failed), scheduled (true | false).
import FoundationEssentials

public enum PracticeExport {
    public static let columns = ["id", "kind", "name", "teacher", "preset", "meditation_id", "start",
                                 "planned_seconds", "heard_seconds", "end_reason", "scheduled"]

    public static func csv(_ entries: [PracticeEntry]) -> String {
        var out = columns.joined(separator: ",") + "\r\n"
        for e in entries {
            let fields = [e.id, e.kind.rawValue, e.name, e.teacher ?? "", e.preset ?? "", e.meditationID ?? "",
                          e.start.iso8601, seconds(e.plannedMilliseconds), seconds(e.heardMilliseconds), e.endReason,
                          e.scheduled ? "true" : "false"]
            out += fields.map(quote).joined(separator: ",") + "\r\n"
        }
        return out
    }

    /// One JSON object per entry, in an array (times in ISO 8601 and seconds).
    public static func json(_ entries: [PracticeEntry]) -> [[String: JSONField]] {
        entries.map { e in
            [
                "id": .string(e.id), "kind": .string(e.kind.rawValue), "name": .string(e.name),
                "teacher": e.teacher.map(JSONField.string) ?? .null, "preset": e.preset.map(JSONField.string) ?? .null,
                "meditationId": e.meditationID.map(JSONField.string) ?? .null, "start": .string(e.start.iso8601),
                "plannedSeconds": .number(Double(e.plannedMilliseconds) / 1000),
                "heardSeconds": .number(Double(e.heardMilliseconds) / 1000),
                "endReason": .string(e.endReason), "scheduled": .bool(e.scheduled),
            ]
        }
    }

    public enum JSONField: Sendable, Equatable, Codable {
        case string(String), number(Double), bool(Bool), null

        public init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if c.decodeNil() {
                self = .null
            } else if let b = try? c.decode(Bool.self) {
                self = .bool(b)
            } else if let n = try? c.decode(Double.self) {
                self = .number(n)
            } else {
                self = .string(try c.decode(String.self))
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            switch self {
            case .string(let s): try c.encode(s)
            case .number(let n): try c.encode(n)
            case .bool(let b): try c.encode(b)
            case .null: try c.encodeNil()
            }
        }

        var text: String? {
            switch self {
            case .string(let s): return s
            case .number(let n): return String(n)
            case .bool(let b): return b ? "true" : "false"
            case .null: return nil
            }
        }
    }

    public struct ImportError: Error, Sendable, Equatable, CustomStringConvertible {
        public let line: Int
        public let reason: String
        public var description: String { "line \(line): \(reason)" }
    }

    /// Reads our own CSV or JSON export back (the first non-blank character decides).
    public static func read(_ text: String) throws(ImportError) -> [PracticeEntry] {
        let trimmed = text.trimmingWhitespace()
        if trimmed.hasPrefix("[") {
            let objects: [[String: JSONField]]
            do { objects = try JSONDecoder().decode([[String: JSONField]].self, from: Data(trimmed.utf8)) } catch {
                throw ImportError(line: 1, reason: "not a JSON array of practice entries")
            }
            return try objects.enumerated().map { (i, o) throws(ImportError) in
                try entry(from: { o[$0]?.text }, line: i + 1)
            }
        }
        let rows = try parseCSV(text)
        guard let header = rows.first, header == columns else {
            throw ImportError(line: 1, reason: "the header is not \(columns.joined(separator: ","))")
        }
        return try rows.dropFirst().enumerated().map { (i, row) throws(ImportError) in
            guard row.count == columns.count else {
                throw ImportError(line: i + 2, reason: "\(row.count) fields, \(columns.count) expected")
            }
            let byName = Dictionary(uniqueKeysWithValues: zip(columns, row))
            return try entry(from: { key in
                let csvKey = ["meditationId": "meditation_id", "plannedSeconds": "planned_seconds",
                              "heardSeconds": "heard_seconds", "endReason": "end_reason"][key] ?? key
                let v = byName[csvKey]
                return v?.isEmpty == true ? nil : v
            }, line: i + 2)
        }
    }

    static func entry(from field: (String) -> String?, line: Int) throws(ImportError) -> PracticeEntry {
        func need(_ key: String) throws(ImportError) -> String {
            guard let v = field(key), !v.isEmpty else { throw ImportError(line: line, reason: "\(key) is missing") }
            return v
        }
        func ms(_ key: String) throws(ImportError) -> Int64 {
            let text = try need(key)
            guard let v = TimeText.decimal(Substring(text)), v <= Double(TimeText.maximum) / 1000 else {
                throw ImportError(line: line, reason: "\(key) '\(Display.clean(text))' is not a number of seconds")
            }
            return Int64((v * 1000).rounded())
        }
        let id = try need("id").lowercased()
        guard StoredName.isUUID(Substring(id)) else { throw ImportError(line: line, reason: "id '\(Display.clean(id))' is not a UUID") }
        guard let kind = SessionKind(rawValue: try need("kind")), kind == .timer || kind == .guided else {
            throw ImportError(line: line, reason: "kind must be timer or guided")
        }
        guard let start = LocalTime(iso8601: try need("start")) else {
            throw ImportError(line: line, reason: "start is not an ISO 8601 time with its offset")
        }
        let reason = try need("endReason")
        guard ["completed", "finished", "stopped", "replaced", "preempted", "failed"].contains(reason) else {
            throw ImportError(line: line, reason: "end reason '\(Display.clean(reason))' is not one of ours")
        }
        let name = try need("name")
        guard name.count <= 500 else { throw ImportError(line: line, reason: "the name is too long") }
        return PracticeEntry(id: id, kind: kind, name: name, meditationID: field("meditationId"), teacher: field("teacher"),
                             preset: field("preset"), start: start, plannedMilliseconds: try ms("plannedSeconds"),
                             heardMilliseconds: try ms("heardSeconds"), endReason: reason,
                             scheduled: field("scheduled") == "true")
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
        guard field.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return field }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
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
        if quoted { throw ImportError(line: line, reason: "a quoted field is not closed") }
        if !field.isEmpty || !row.isEmpty {
            row.append(field)
            rows.append(row)
        }
        return rows
    }
}
