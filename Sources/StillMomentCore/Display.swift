/// Text made safe to print on a terminal: tags, file names and whatever a daemon or a
/// catalog row says may carry escape sequences that would rewrite the screen.
public enum Display {
    /// The text without control characters (C0 except tab, DEL, C1, and the Unicode line
    /// and paragraph separators) and without the format characters that reorder text
    /// (`isReordering`); a line break is replaced by a space, as it separated words.
    public static func clean(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { isControl($0) || isReordering($0) }) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if !isControl(scalar) && !isReordering(scalar) {
                out.append(scalar)
            } else if scalar == "\n" || scalar == "\r" {
                out.append(" ")
            }
        }
        return String(out)
    }

    /// Keeps line breaks (for multi-line output of our own), cleans each line.
    public static func cleanLines(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { clean(String($0)) }.joined(separator: "\n")
    }

    /// The Unicode format characters that change the order text is shown in: the
    /// bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) and
    /// the marks (U+200E, U+200F, U+061C). A name with U+202E shows reversed on a terminal.
    public static func isReordering(_ s: Unicode.Scalar) -> Bool {
        switch s.value {
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    public static func isControl(_ s: Unicode.Scalar) -> Bool {
        let v = s.value
        if v == 0x09 { return false }
        return v < 0x20 || (0x7F...0x9F).contains(v) || v == 0x2028 || v == 0x2029
    }
}
