// JSON values: the payloads of the control protocol, read and written as one line.
import FoundationEssentials

/// A JSON value, both ways (the control protocol's payloads).
public enum JSON: Codable, Sendable, Equatable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case null
    case array([JSON])
    case object([String: JSON])

    /// Decodes in one pass, nesting at most `JSONParser.maxDepth` deep (the socket's limit).
    /// Each value asks for an object, an array, then the leaf kinds, and only ever gives up
    /// a container it could not open, never a subtree it decoded. Foundation's decoder
    /// makes every failed try pay for a coding path as long as the nesting, so at a depth
    /// of 510 even that was quadratic (a 63-KB line took tens of seconds); with the depth
    /// limited, each value costs a bounded amount: linear in the input, whatever its shape.
    /// (The control socket reads with `JSONParser`, which needs no Decoder at all.)
    public init(from decoder: any Decoder) throws {
        let depth = decoder.codingPath.count
        func tooDeep() -> DecodingError {
            .dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "nested deeper than \(JSONParser.maxDepth)"))
        }
        if let o = try? decoder.container(keyedBy: Key.self) {
            guard depth < JSONParser.maxDepth else { throw tooDeep() }
            var object: [String: JSON] = [:]
            for key in o.allKeys { object[key.stringValue] = try o.decode(JSON.self, forKey: key) }
            self = .object(object)
            return
        }
        if var a = try? decoder.unkeyedContainer() {
            guard depth < JSONParser.maxDepth else { throw tooDeep() }
            var array: [JSON] = []
            while !a.isAtEnd { array.append(try a.decode(JSON.self)) }
            self = .array(array)
            return
        }
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null; return }
        if let b = try? c.decode(Bool.self) { self = .bool(b); return }
        if let n = try? c.decode(Double.self) { self = .number(n); return }
        self = .string(try c.decode(String.self))
    }

    /// Any key of an object.
    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let s): try c.encode(s)
        case .number(let n):
            if n == n.rounded(), abs(n) < 1e15 { try c.encode(Int64(n)) } else { try c.encode(n) }
        case .bool(let b): try c.encode(b)
        case .null: try c.encodeNil()
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    public subscript(key: String) -> JSON? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var string: String? { if case .string(let s) = self { return s } else { return nil } }
    public var number: Double? { if case .number(let n) = self { return n } else { return nil } }

    /// One line of JSON (keys sorted), without a trailing newline.
    public var line: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(self) else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }
}
