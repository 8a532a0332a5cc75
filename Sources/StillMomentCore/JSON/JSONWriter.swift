// Writes a JSON value as one line of UTF-8: keys sorted (the same value gives the same bytes),
// slashes not escaped, control characters as escapes, whole numbers without a fraction.

public enum JSONWriter {
    /// The value as one line (no newline).
    public static func bytes(_ value: JSON) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(value, into: &out)
        return out
    }

    /// Appends the value to `out`, pretty-printed with two spaces when `indent` is given.
    public static func write(_ value: JSON, into out: inout [UInt8], indent: Int? = nil) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): number(n, into: &out)
        case .string(let s): string(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (k, v) in a.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent.map { $0 + 1 }, into: &out)
                write(v, into: &out, indent: indent.map { $0 + 1 })
            }
            if !a.isEmpty { newline(indent, into: &out) }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            for (k, member) in o.sorted(by: { $0.key < $1.key }).enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent.map { $0 + 1 }, into: &out)
                string(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                if indent != nil { out.append(UInt8(ascii: " ")) }
                write(member.value, into: &out, indent: indent.map { $0 + 1 })
            }
            if !o.isEmpty { newline(indent, into: &out) }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func newline(_ indent: Int?, into out: inout [UInt8]) {
        guard let indent else { return }
        out.append(0x0A)
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * indent))
    }

    /// A whole number below 2^53 in digits (what every reader takes exactly); any other
    /// finite number in Swift's shortest form that reads back the same (`0.1`, `1e+300`).
    /// JSON has no infinity or NaN: those are written as null (the parser never makes them).
    static func number(_ n: Double, into out: inout [UInt8]) {
        guard n.isFinite else {
            out.append(contentsOf: "null".utf8)
            return
        }
        if n == n.rounded(), abs(n) < 9_007_199_254_740_992 {
            out.append(contentsOf: String(Int64(n)).utf8)
        } else {
            out.append(contentsOf: "\(n)".utf8)
        }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    static func string(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            // Runs of bytes that need no escape (printable ASCII but the quote and the
            // backslash, and every byte of a multi-byte character) are copied whole.
            var run = 0
            for i in bytes.indices {
                let b = bytes[i]
                if b >= 0x20, b != 0x22, b != 0x5C, b != 0x7F { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<i]))
                escape(b, into: &out)
                run = i + 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func escape(_ b: UInt8, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\\"))
        switch b {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(b)
        case 0x0A: out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(UInt8(ascii: "r"))
        case 0x09: out.append(UInt8(ascii: "t"))
        default:
            out.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(b >> 4)], hex[Int(b & 0xF)]])
        }
    }
}
