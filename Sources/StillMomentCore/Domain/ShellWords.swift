/// Words of a line as a shell splits them, for the timetable file (`schedule import` and
/// `export`): blanks separate, single quotes keep everything, double quotes keep everything
/// but `\"` and `\\`, a backslash outside quotes keeps the next character, and `#` at the
/// start of a word begins a comment. `quote` writes a word back so that `split` reads it
/// exactly: `split(quote(w)) == [w]` for every word without control characters.
public enum ShellWords {
    /// Read scalar by scalar, not by grapheme: a blank and a combining mark after it are one
    /// character, which read as a blank and lost the mark (`play \u{350}x` was `play x`;
    /// found by fuzz/schedule). Lines written before that by `quote` read the same unless a
    /// quote, a backslash or a `#` in them carries a combining mark.
    public static func split(_ line: String) throws(CoreError) -> [String] {
        var words: [String] = [], word = String.UnicodeScalarView(), quote: Unicode.Scalar?, started = false, escaped = false
        for ch in line.unicodeScalars {
            if escaped {
                if quote == "\"" && ch != "\"" && ch != "\\" { word.append("\\") }
                word.append(ch)
                escaped = false
            } else if let q = quote {
                if ch == q { quote = nil } else if ch == "\\" && q == "\"" { escaped = true } else { word.append(ch) }
            } else if ch == "\"" || ch == "'" {
                quote = ch
                started = true
            } else if ch == "\\" {
                escaped = true
                started = true
            } else if ch == "#" && !started && word.isEmpty {
                break                      // a comment to the end of the line
            } else if ch.properties.isWhitespace {
                if started || !word.isEmpty { words.append(String(word)) }
                word = String.UnicodeScalarView()
                started = false
            } else {
                word.append(ch)
            }
        }
        guard quote == nil else { throw CoreError.badRequest(both("a quote is not closed", "ein Anführungszeichen ist nicht geschlossen")) }
        guard !escaped else { throw CoreError.badRequest(both("a backslash ends the line", "ein Backslash beendet die Zeile")) }
        if started || !word.isEmpty { words.append(String(word)) }
        return words
    }

    /// The word as `split` reads it back: as it is when it needs no quoting, else in double
    /// quotes with `"` and `\` escaped.
    public static func quote(_ s: String) -> String {
        let plain = !s.isEmpty && s.unicodeScalars.first != "#"
            && !s.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0 == "\"" || $0 == "'" || $0 == "\\" })
        if plain { return s }
        var out = String.UnicodeScalarView(["\""])
        for ch in s.unicodeScalars {
            if ch == "\"" || ch == "\\" { out.append("\\") }
            out.append(ch)
        }
        out.append("\"")
        return String(out)
    }
}
