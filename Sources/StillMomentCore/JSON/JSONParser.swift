/// A small, strict JSON reader (RFC 8259) for what arrives on the control socket: one
/// pass over the bytes (linear time), nesting at most `maxDepth` deep, numbers as Double,
/// strings with every escape (surrogate pairs joined, lone ones refused). Errors say where.
import Glibc

public struct JSONParseError: Error, Equatable, Sendable, CustomStringConvertible {
    public let offset: Int
    public let reason: String
    public var description: String { "\(reason) at byte \(offset)" }
}

public enum JSONParser {
    /// Arrays and objects nest at most this deep.
    public static let maxDepth = 32

    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSON {
        let data = Array(bytes)
        var p = Reader(data: data)
        p.skipSpace()
        let value = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == data.count else { throw p.fail("text after the value") }
        return value
    }

    struct Reader {
        let data: [UInt8]
        var i = 0

        func fail(_ reason: String) -> JSONParseError { JSONParseError(offset: i, reason: reason) }

        mutating func skipSpace() {
            while i < data.count, data[i] == 0x20 || data[i] == 0x09 || data[i] == 0x0A || data[i] == 0x0D { i += 1 }
        }

        mutating func value(depth: Int) throws(JSONParseError) -> JSON {
            guard i < data.count else { throw fail("the value is missing") }
            switch data[i] {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try word("true"); return .bool(true)
            case UInt8(ascii: "f"): try word("false"); return .bool(false)
            case UInt8(ascii: "n"): try word("null"); return .null
            default: return .number(try number())
            }
        }

        mutating func word(_ w: StaticString) throws(JSONParseError) {
            let n = w.utf8CodeUnitCount
            guard i + n <= data.count else { throw fail("not a JSON value") }
            for k in 0..<n where data[i + k] != w.utf8Start[k] { throw fail("not a JSON value") }
            i += n
        }

        mutating func object(depth: Int) throws(JSONParseError) -> JSON {
            guard depth <= JSONParser.maxDepth else { throw fail("nested deeper than \(JSONParser.maxDepth)") }
            i += 1
            var o: [String: JSON] = [:]
            skipSpace()
            if i < data.count, data[i] == UInt8(ascii: "}") {
                i += 1
                return .object(o)
            }
            while true {
                skipSpace()
                guard i < data.count, data[i] == UInt8(ascii: "\"") else { throw fail("a key must be a string") }
                let key = try string()
                skipSpace()
                guard i < data.count, data[i] == UInt8(ascii: ":") else { throw fail("':' expected") }
                i += 1
                skipSpace()
                // A key given twice is refused: readers disagree on which one counts.
                guard o.updateValue(try value(depth: depth), forKey: key) == nil else { throw fail("a key given twice") }
                skipSpace()
                guard i < data.count else { throw fail("the object is not closed") }
                if data[i] == UInt8(ascii: ",") { i += 1; continue }
                if data[i] == UInt8(ascii: "}") { i += 1; return .object(o) }
                throw fail("',' or '}' expected")
            }
        }

        mutating func array(depth: Int) throws(JSONParseError) -> JSON {
            guard depth <= JSONParser.maxDepth else { throw fail("nested deeper than \(JSONParser.maxDepth)") }
            i += 1
            var a: [JSON] = []
            skipSpace()
            if i < data.count, data[i] == UInt8(ascii: "]") {
                i += 1
                return .array(a)
            }
            while true {
                skipSpace()
                a.append(try value(depth: depth))
                skipSpace()
                guard i < data.count else { throw fail("the array is not closed") }
                if data[i] == UInt8(ascii: ",") { i += 1; continue }
                if data[i] == UInt8(ascii: "]") { i += 1; return .array(a) }
                throw fail("',' or ']' expected")
            }
        }

        mutating func hex4() throws(JSONParseError) -> UInt32 {
            guard i + 4 <= data.count else { throw fail("a \\u escape is cut short") }
            var v: UInt32 = 0
            for _ in 0..<4 {
                let c = data[i]
                let d: UInt32
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
                default: throw fail("a \\u escape needs four hex digits")
                }
                v = v << 4 | d
                i += 1
            }
            return v
        }

        mutating func string() throws(JSONParseError) -> String {
            i += 1
            var bytes: [UInt8] = []
            while true {
                guard i < data.count else { throw fail("the string is not closed") }
                let c = data[i]
                if c == UInt8(ascii: "\"") {
                    i += 1
                    break
                }
                if c < 0x20 { throw fail("a control character in a string") }
                if c != UInt8(ascii: "\\") {
                    bytes.append(c)
                    i += 1
                    continue
                }
                i += 1
                guard i < data.count else { throw fail("an escape is cut short") }
                let e = data[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): bytes.append(e)
                case UInt8(ascii: "b"): bytes.append(0x08)
                case UInt8(ascii: "f"): bytes.append(0x0C)
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard i + 2 <= data.count, data[i] == UInt8(ascii: "\\"), data[i + 1] == UInt8(ascii: "u") else {
                            throw fail("a lone surrogate in a string")
                        }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("a lone surrogate in a string") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw fail("a lone surrogate in a string")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("not a Unicode scalar") }
                    bytes.append(contentsOf: Array(String(Character(u)).utf8))
                default:
                    throw fail("an unknown escape")
                }
            }
            guard let s = String(validating: bytes, as: UTF8.self) else { throw fail("a string that is not UTF-8") }
            return s
        }

        mutating func number() throws(JSONParseError) -> Double {
            let start = i
            if i < data.count, data[i] == UInt8(ascii: "-") { i += 1 }
            func digits() -> Int {
                let s = i
                while i < data.count, data[i] >= UInt8(ascii: "0"), data[i] <= UInt8(ascii: "9") { i += 1 }
                return i - s
            }
            guard i < data.count else { throw fail("not a JSON value") }
            if data[i] == UInt8(ascii: "0") { i += 1 } else { guard digits() > 0 else { throw fail("not a JSON value") } }
            if i < data.count, data[i] == UInt8(ascii: ".") {
                i += 1
                guard digits() > 0 else { throw fail("a number needs digits after '.'") }
            }
            if i < data.count, data[i] == UInt8(ascii: "e") || data[i] == UInt8(ascii: "E") {
                i += 1
                if i < data.count, data[i] == UInt8(ascii: "+") || data[i] == UInt8(ascii: "-") { i += 1 }
                guard digits() > 0 else { throw fail("a number needs digits in its exponent") }
            }
            guard i - start <= 64, let v = Double(String(decoding: data[start..<i], as: UTF8.self)) else {
                throw fail("a number too long")
            }
            // 1e400 would be infinity, which no JSON can say back.
            guard v.isFinite else { throw fail("a number out of range") }
            return v
        }
    }
}
