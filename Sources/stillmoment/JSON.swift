import FoundationEssentials

/// A JSON value for the commands' `--json` output (keys sorted, one line).
enum JSONValue: Encodable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case null
    case object([String: JSONValue])
    case array([JSONValue])

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let s): try c.encode(s)
        case .number(let n):
            if n == n.rounded(), abs(n) < 1e15 { try c.encode(Int64(n)) } else { try c.encode(n) }
        case .bool(let b): try c.encode(b)
        case .null: try c.encodeNil()
        case .object(let o): try c.encode(o)
        case .array(let a): try c.encode(a)
        }
    }
}

func jsonText(_ value: JSONValue) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    guard let data = try? encoder.encode(value) else { return "null" }
    return String(decoding: data, as: UTF8.self)
}

func jsonArray(_ items: [[String: JSONValue]]) -> String { jsonText(.array(items.map(JSONValue.object))) }
func jsonObject(_ item: [String: JSONValue]) -> String { jsonText(.object(item)) }

enum ISO8601 {
    static func format(_ date: Date) -> String { date.formatted(.iso8601) }
}

/// "+1.5 dB"
func decibels(_ db: Double) -> String {
    let tenths = (db * 10).rounded() / 10
    return (tenths >= 0 ? "+" : "") + "\(tenths) dB"
}

/// "12.3 MB"
func megabytes(_ bytes: Int64) -> String {
    let tenths = (Double(bytes) / 100_000).rounded() / 10
    return "\(tenths) MB"
}
