import StillMomentCore
import FoundationEssentials
import StillMomentControl

/// The commands' `--json` output uses the control protocol's JSON value.
typealias JSONValue = JSON

func jsonText(_ value: JSON) -> String { value.line }

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
