/// Times as people type them: `20m`, `90s`, `1h15m`, `12m30s`, a bare number of
/// minutes (`15`, `2.5`), or a clock `3:20` / `1:02:03`. Kept in milliseconds.
public enum TimeText {
    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        public let text: String
        public var description: String {
            "'\(text)' is not a time: write it like 20m, 90s, 1h15m, 12m30s, 3:20, or a number of minutes"
        }
    }

    /// Parses a non-negative time in milliseconds.
    public static func parse(_ raw: String) throws(ParseError) -> Int64 {
        let text = raw.trimmingWhitespace().lowercased()
        guard !text.isEmpty else { throw ParseError(text: raw) }
        if text.contains(":") { return try parseClock(text, raw: raw) }
        if let minutes = Double(text), minutes.isFinite, minutes >= 0 {
            return Int64((minutes * 60_000).rounded())
        }
        var total: Double = 0
        var number = ""
        var seen: Set<Character> = []
        var lastUnitRank = -1
        let ranks: [Character: Int] = ["h": 0, "m": 1, "s": 2]
        let factors: [Character: Double] = ["h": 3_600_000, "m": 60_000, "s": 1000]
        for ch in text {
            if ch.isNumber || ch == "." {
                number.append(ch)
            } else if let rank = ranks[ch], let factor = factors[ch] {
                guard !number.isEmpty, let value = Double(number), value.isFinite, value >= 0,
                      !seen.contains(ch), rank > lastUnitRank
                else { throw ParseError(text: raw) }
                seen.insert(ch)
                lastUnitRank = rank
                total += value * factor
                number = ""
            } else {
                throw ParseError(text: raw)
            }
        }
        guard number.isEmpty, !seen.isEmpty else { throw ParseError(text: raw) }
        return Int64(total.rounded())
    }

    /// Parses a time that may count back from the end: `-2m` is (true, 120000).
    public static func parseSigned(_ raw: String) throws(ParseError) -> (fromEnd: Bool, ms: Int64) {
        let text = raw.trimmingWhitespace()
        if text.hasPrefix("-") {
            return (true, try parse(String(text.dropFirst())))
        }
        return (false, try parse(text))
    }

    private static func parseClock(_ text: String, raw: String) throws(ParseError) -> Int64 {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 || parts.count == 3 else { throw ParseError(text: raw) }
        var values: [Double] = []
        for (i, p) in parts.enumerated() {
            guard let v = Double(p), v >= 0, v.isFinite else { throw ParseError(text: raw) }
            // Minutes and seconds after the first field stay below 60.
            if i > 0 && v >= 60 { throw ParseError(text: raw) }
            values.append(v)
        }
        let seconds = parts.count == 2 ? values[0] * 60 + values[1] : values[0] * 3600 + values[1] * 60 + values[2]
        return Int64((seconds * 1000).rounded())
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
