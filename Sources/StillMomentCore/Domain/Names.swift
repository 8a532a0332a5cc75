/// The one rule for names people give (presets, schedule entries, meditations, teachers,
/// albums): trimmed, of a bounded length, with no control character (a tab included: it
/// shifts columns in lists and files) and no Unicode format character that reorders text
/// (U+202E and its kind make a listing say something else than what is stored).
public enum Names {
    /// Checks a name; `option` names the field in the error, `maxLength` counts characters.
    public static func check(_ raw: String, option: String, maxLength: Int, allowEmpty: Bool = false) throws(CoreError) -> String {
        let name = raw.trimmingWhitespace()
        guard (allowEmpty || !name.isEmpty), name.count <= maxLength,
              !name.unicodeScalars.contains(where: { $0 == "\t" || Display.isControl($0) || Display.isReordering($0) }) else {
            let shown = Display.clean(String(raw.prefix(maxLength)))
            throw CoreError.badValue(option: option, reason: both(
                "'\(shown)' is not a name here: \(allowEmpty ? 0 : 1) to \(maxLength) characters, no tabs, control or text-direction characters",
                "'\(shown)' ist hier kein Name: \(allowEmpty ? 0 : 1) bis \(maxLength) Zeichen, keine Tabulatoren, Steuer- oder Schreibrichtungszeichen"))
        }
        return name
    }
}
