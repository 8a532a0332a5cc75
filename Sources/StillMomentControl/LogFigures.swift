// Figures as the daemon's log lines write them.

enum LogFigures {
    /// `seconds` as milliseconds with one decimal ("1.6"), without Foundation's formatters
    /// (their locale data stays resident once touched).
    static func milliseconds(_ seconds: Double) -> String {
        let tenths = Int((max(0, seconds) * 10_000).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}
