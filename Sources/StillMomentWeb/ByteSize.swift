/// A size as a person writes it: `500M`, `1G`, `2.5G`, `800000` (bytes); 1 KiB to 64 GiB.
import StillMomentCore

public enum ByteSize {
    public static func parse(_ text: String, option: String) throws(CoreError) -> Int64 {
        let t = text.trimmingWhitespace().uppercased()
        let bad = CoreError.badValue(option: option, reason: both(
            "'\(Display.clean(String(text.prefix(40))))' is not a size from 1K to 64G (e.g. 500M, 2G)",
            "'\(Display.clean(String(text.prefix(40))))' ist keine Größe von 1K bis 64G (z. B. 500M, 2G)"))
        var number = Substring(t)
        var unit: Double = 1
        if let last = number.last, "KMG".contains(last) {
            unit = last == "K" ? 1024 : last == "M" ? 1024 * 1024 : 1024 * 1024 * 1024
            number = number.dropLast()
        }
        if number.hasSuffix("I") || number.hasSuffix("B") { throw bad }
        guard !number.isEmpty, number.count <= 12, number.allSatisfy({ $0.isASCIIDigit || $0 == "." }),
              let n = Double(number), n.isFinite else { throw bad }
        let bytes = n * unit
        guard bytes >= 1024, bytes <= 64 * 1024 * 1024 * 1024 else { throw bad }
        return Int64(bytes)
    }
}
