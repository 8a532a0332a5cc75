/// Times as people type them: `20m`, `90s`, `1h15m`, `12m30s`, a bare number of
/// minutes (`15`, `2.5`), or a clock `3:20` / `1:02:03`. Kept in milliseconds.
public enum TimeText {
    /// The longest time any option takes (each option then has its own, smaller limit):
    /// a value past it is refused before it is converted, so no input can overflow.
    public static let maximum: Int64 = 1000 * 3_600_000
    /// Longer text is not a time anyone types.
    static let maximumLength = 40

    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        public let text: String
        public let tooLong: Bool
        public init(text: String, tooLong: Bool = false) {
            self.text = text
            self.tooLong = tooLong
        }
        public var description: String {
            let shown = Display.clean(String(text.prefix(maximumLength)))
            if text.trimmingWhitespace().hasPrefix("-") {
                return Language.current == .de
                    ? "'\(shown)' ist negativ: Zeiten zählen vorwärts (zum Beispiel 5m)"
                    : "'\(shown)' is negative: times count forward (for example 5m)"
            }
            if tooLong {
                return Language.current == .de
                    ? "'\(shown)' ist zu lang: höchstens 1000h"
                    : "'\(shown)' is too long: at most 1000h"
            }
            return Language.current == .de
                ? "'\(shown)' ist keine Zeit: schreib sie wie 20m, 90s, 1h15m, 12m30s, 3:20 oder als Minutenzahl"
                : "'\(shown)' is not a time: write it like 20m, 90s, 1h15m, 12m30s, 3:20, or a number of minutes"
        }
    }

    /// Parses a non-negative time in milliseconds, at most `maximum`. Numbers are plain
    /// decimals (`2.5`; no exponents, signs, hex, `inf` or `nan`).
    public static func parse(_ raw: String) throws(ParseError) -> Int64 {
        guard raw.utf8.count <= maximumLength * 4 else { throw ParseError(text: raw) }
        let text = raw.trimmingWhitespace().lowercased()
        guard !text.isEmpty, text.count <= maximumLength else { throw ParseError(text: raw) }
        if text.contains(":") { return try parseClock(text, raw: raw) }
        if let minutes = decimal(Substring(text)) {
            return try milliseconds(minutes * 60_000, raw: raw)
        }
        var total: Double = 0
        var number = Substring()
        var start = text.startIndex
        var lastUnitRank = -1
        let factors: [Character: (rank: Int, ms: Double)] = ["h": (0, 3_600_000), "m": (1, 60_000), "s": (2, 1000)]
        for i in text.indices {
            let ch = text[i]
            if ch.isASCII && (ch.isNumber || ch == ".") { continue }
            guard let unit = factors[ch] else { throw ParseError(text: raw) }
            number = text[start..<i]
            guard let value = decimal(number), unit.rank > lastUnitRank else { throw ParseError(text: raw) }
            lastUnitRank = unit.rank
            total += value * unit.ms
            start = text.index(after: i)
        }
        guard start == text.endIndex, lastUnitRank >= 0 else { throw ParseError(text: raw) }
        return try milliseconds(total, raw: raw)
    }

    /// Parses a time that may count back from the end: `-2m` is (true, 120000).
    public static func parseSigned(_ raw: String) throws(ParseError) -> (fromEnd: Bool, ms: Int64) {
        let text = raw.trimmingWhitespace()
        if text.hasPrefix("-") {
            return (true, try parse(String(text.dropFirst())))
        }
        return (false, try parse(text))
    }

    /// A plain decimal: ASCII digits with at most one point, not empty.
    static func decimal(_ text: Substring) -> Double? {
        guard !text.isEmpty, text != ".", text.count <= maximumLength,
              text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              text.filter({ $0 == "." }).count <= 1
        else { return nil }
        return Double(text)
    }

    /// Rounds and checks the range before converting (a Double past Int64 traps).
    static func milliseconds(_ value: Double, raw: String) throws(ParseError) -> Int64 {
        guard value.isFinite, value >= 0 else { throw ParseError(text: raw) }
        let rounded = value.rounded()
        guard rounded <= Double(maximum) else { throw ParseError(text: raw, tooLong: true) }
        return Int64(rounded)
    }

    private static func parseClock(_ text: String, raw: String) throws(ParseError) -> Int64 {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 || parts.count == 3 else { throw ParseError(text: raw) }
        var values: [Double] = []
        for (i, p) in parts.enumerated() {
            guard let v = decimal(p) else { throw ParseError(text: raw) }
            // Minutes and seconds after the first field stay below 60.
            if i > 0 && v >= 60 { throw ParseError(text: raw) }
            values.append(v)
        }
        let seconds = parts.count == 2 ? values[0] * 60 + values[1] : values[0] * 3600 + values[1] * 60 + values[2]
        return try milliseconds(seconds * 1000, raw: raw)
    }

    /// `12:30`, or `1:02:03` from an hour on (milliseconds rounded down to seconds).
    public static func clock(_ ms: Int64) -> String {
        let total = max(0, ms) / 1000
        let h = total / 3600, m = (total / 60) % 60, s = total % 60
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return h > 0 ? "\(h):\(two(m)):\(two(s))" : "\(two(m)):\(two(s))"
    }

    /// `20m`, `1h15m`, `12m30s`, `90s` → the compact form this parser reads back.
    public static func compact(_ ms: Int64) -> String {
        if ms % 1000 != 0 { return "\(Double(ms) / 1000)s" }
        let total = ms / 1000
        let h = total / 3600, m = (total / 60) % 60, s = total % 60
        var out = ""
        if h > 0 { out += "\(h)h" }
        if m > 0 { out += "\(m)m" }
        if s > 0 || out.isEmpty { out += "\(s)s" }
        return out
    }
}

extension String {
    /// The string without leading and trailing white space.
    public func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}
