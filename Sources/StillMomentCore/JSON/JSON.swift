// JSON values: the payloads of the control protocol, the exports and the stored settings,
// read by JSONParser and written by JSONWriter (one JSON stack: Codable values go through
// JSONValueEncoder and JSONValueDecoder, never through Foundation's coders).
import FoundationEssentials

/// A JSON value, both ways.
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
    public var line: String { String(decoding: JSONWriter.bytes(self), as: UTF8.self) }
}

// MARK: Codable values ↔ JSON (the one way every value is written and read)

extension JSON {
    /// A Codable value as a JSON value (what goes on the wire or into a file); null if it
    /// cannot be encoded (a non-finite number).
    public init(encoding value: some Encodable) {
        self = (try? JSONValueEncoder.encode(value)) ?? .null
    }

    /// The value with every `LocalizedText` in it written in `language` (an answer or an
    /// event for one client).
    public init(encoding value: some Encodable, in language: Language) {
        self = (try? JSONValueEncoder.encode(value, language: language)) ?? .null
    }

    /// The value decoded as `type`, keys it does not know ignored (what a client reads
    /// from a newer daemon); nil when it does not have that shape.
    public func decoded<T: Decodable>(as type: T.Type) -> T? {
        try? JSONValueDecoder.decode(type, from: self)
    }

    /// Parses UTF-8 text and decodes it as `type`; `strict` refuses keys nobody read.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>, strict: Bool = false) throws(JSONValueDecoder.Failure) -> T {
        let value: JSON
        do { value = try JSONParser.parse(bytes) } catch {
            throw JSONValueDecoder.Failure(path: [], reason: .refused(error.description))
        }
        return try JSONValueDecoder.decode(type, from: value, strict: strict)
    }

    /// The value, two spaces an indent (for files people read: exports, settings.json).
    public var pretty: String {
        var out: [UInt8] = []
        JSONWriter.write(self, into: &out, indent: 0)
        return String(decoding: out, as: UTF8.self)
    }
}

/// An array's index as a coding key (the coders' paths: `items.[2]`).
struct JSONIndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "\(intValue ?? 0)" }
    init(_ i: Int) { intValue = i }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}
