/// Text made safe to print on a terminal: tags, file names and whatever a daemon or a
/// catalog row says may carry escape sequences that would rewrite the screen.
public enum Display {
    /// The text without control characters (C0 except tab, DEL, C1, and the Unicode line
    /// and paragraph separators); each is replaced by a space when it separated words.
    public static func clean(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if !isControl(scalar) {
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

    public static func isControl(_ s: Unicode.Scalar) -> Bool {
        let v = s.value
        if v == 0x09 { return false }
        return v < 0x20 || (0x7F...0x9F).contains(v) || v == 0x2028 || v == 0x2029
    }
}
