/// Keeps a CSV cell from being read as a formula by a spreadsheet (OWASP "CSV injection"):
/// a cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading
/// `'`, and the import takes it off again, so export → import keeps every name exactly.
///
/// The rule is one bijection: a cell made of any number of `'` (zero or more) followed by
/// one of those characters gets one more `'` in front; on the way back, a cell made of one
/// or more `'` followed by one of those characters loses its first `'`. Any other cell is
/// written and read as it is. So `=x` ⇄ `'=x`, `'=x` ⇄ `''=x`, and `'plain` stays `'plain`.
public enum SpreadsheetCell {
    static let triggers: Set<Unicode.Scalar> = ["=", "+", "-", "@", "\t", "\r"]

    /// The quotes in front, and whether what follows them starts a formula.
    private static func shape(_ cell: String) -> (quotes: Int, formula: Bool) {
        var quotes = 0
        for scalar in cell.unicodeScalars {
            if scalar == "'" {
                quotes += 1
            } else {
                return (quotes, triggers.contains(scalar))
            }
        }
        return (quotes, false)
    }

    /// The cell as written to the CSV file.
    public static func neutralised(_ cell: String) -> String {
        shape(cell).formula ? "'" + cell : cell
    }

    /// The cell as it was before `neutralised`.
    public static func restored(_ cell: String) -> String {
        let s = shape(cell)
        return s.formula && s.quotes > 0 ? String(cell.unicodeScalars.dropFirst()) : cell
    }
}
