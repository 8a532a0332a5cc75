// Decodable values from JSON values, without Foundation. Strict when asked (what a client
// sends): a key that no decoder read is refused, naming it and the keys that are taken; a
// whole number must be whole and fit its type (1e300 is refused, never wrapped or rounded).
// Linear in the value (JSONParser bounds its depth).

public enum JSONValueDecoder {
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public enum Reason: Sendable, Equatable {
            /// A key nobody read; `known`: the keys that were read there.
            case unknownKey(String, known: [String])
            case missing
            case wrongType(expected: Kind)
            case outOfRange
            /// A value's own init(from:) refused it (its words).
            case refused(String)
        }
        /// What a value had to be, in both languages ("by must be a number").
        public enum Kind: String, Sendable, Equatable {
            case text, number, wholeNumber, bool, object, array
            public var en: String {
                switch self {
                case .text: "a text"
                case .number: "a number"
                case .wholeNumber: "a whole number"
                case .bool: "true or false"
                case .object: "an object"
                case .array: "an array"
                }
            }
            public var de: String {
                switch self {
                case .text: "ein Text"
                case .number: "eine Zahl"
                case .wholeNumber: "eine ganze Zahl"
                case .bool: "true oder false"
                case .object: "ein Objekt"
                case .array: "eine Liste"
                }
            }
        }
        /// Where: the keys and indexes from the top (`options.duration`, `items.[2]`).
        public let path: [String]
        public let reason: Reason

        public var where_: String { path.joined(separator: ".") }
        /// One line, whatever the input's keys and values hold (a value's own refusal may
        /// quote it: an enum's raw value "g\ng" made a refusal of two lines; fuzz/json).
        public var description: String { Display.clean(text) }

        private var text: String {
            switch reason {
            case .unknownKey(let k, let known): return "unknown key '\(k)'" + (path.isEmpty ? "" : " in \(where_)") + "; known: \(known.joined(separator: ", "))"
            case .missing: return "\(where_) is missing"
            case .wrongType(let e): return "\(where_) must be \(e.en)"
            case .outOfRange: return "\(where_) is out of range"
            case .refused(let why): return path.isEmpty ? why : "\(where_): \(why)"
            }
        }
    }

    /// Decodes `value` as `type`. `strict`: refuse keys that were not read.
    public static func decode<T: Decodable>(_ type: T.Type, from value: JSON, strict: Bool = false) throws(Failure) -> T {
        let usage = Usage()
        let result: T
        do {
            result = try T(from: ValueDecoder(value: value, codingPath: [], usage: strict ? usage : nil))
        } catch let failure as Failure {
            throw failure
        } catch let error as DecodingError {
            throw Failure(error)
        } catch {
            throw Failure(path: [], reason: .refused("\(error)"))
        }
        if strict { try usage.check() }
        return result
    }
}

extension JSONValueDecoder.Failure {
    init(_ error: DecodingError) {
        switch error {
        case .keyNotFound(let key, let c): self.init(path: names(c.codingPath + [key]), reason: .missing)
        case .valueNotFound(_, let c): self.init(path: names(c.codingPath), reason: .missing)
        case .typeMismatch(_, let c): self.init(path: names(c.codingPath), reason: .refused(c.debugDescription))
        case .dataCorrupted(let c): self.init(path: names(c.codingPath), reason: .refused(c.debugDescription))
        @unknown default: self.init(path: [], reason: .refused("\(error)"))
        }
    }
}

private func names(_ path: [any CodingKey]) -> [String] {
    path.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
}

/// The objects a strict decode opened and the keys read in each.
private final class Usage {
    struct Opened {
        let path: [any CodingKey]
        let keys: [String]
        let read: Reads
    }
    final class Reads { var keys: Set<String> = [] }
    var opened: [Opened] = []

    func check() throws(JSONValueDecoder.Failure) {
        for o in opened {
            if let unknown = o.keys.filter({ !o.read.keys.contains($0) }).sorted().first {
                throw JSONValueDecoder.Failure(path: names(o.path), reason: .unknownKey(unknown, known: o.read.keys.sorted()))
            }
        }
    }
}

private struct ValueDecoder: Decoder {
    let value: JSON
    let codingPath: [any CodingKey]
    let usage: Usage?
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let o) = value else { throw Leaf.mismatch(codingPath, .object) }
        let reads = Usage.Reads()
        usage?.opened.append(.init(path: codingPath, keys: Array(o.keys), read: reads))
        return KeyedDecodingContainer(KeyedReader<Key>(object: o, codingPath: codingPath, usage: usage, reads: reads))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let a) = value else { throw Leaf.mismatch(codingPath, .array) }
        return UnkeyedReader(array: a, codingPath: codingPath, usage: usage)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleReader(value: value, codingPath: codingPath, usage: usage) }
}

/// The one place a JSON leaf becomes a Swift value.
private enum Leaf {
    static func mismatch(_ path: [any CodingKey], _ expected: JSONValueDecoder.Failure.Kind) -> JSONValueDecoder.Failure {
        JSONValueDecoder.Failure(path: names(path), reason: .wrongType(expected: expected))
    }

    static func bool(_ v: JSON, _ path: [any CodingKey]) throws -> Bool {
        guard case .bool(let b) = v else { throw mismatch(path, .bool) }
        return b
    }

    static func string(_ v: JSON, _ path: [any CodingKey]) throws -> String {
        guard case .string(let s) = v else { throw mismatch(path, .text) }
        return s
    }

    static func double(_ v: JSON, _ path: [any CodingKey]) throws -> Double {
        guard case .number(let n) = v else { throw mismatch(path, .number) }
        return n
    }

    static func integer<T: FixedWidthInteger>(_ v: JSON, _ path: [any CodingKey]) throws -> T {
        guard case .number(let n) = v else { throw mismatch(path, .wholeNumber) }
        guard n == n.rounded() else { throw mismatch(path, .wholeNumber) }
        guard let i = T(exactly: n) else {
            throw JSONValueDecoder.Failure(path: names(path), reason: .outOfRange)
        }
        return i
    }

    static func decode<T: Decodable>(_ type: T.Type, _ v: JSON, _ path: [any CodingKey], _ usage: Usage?) throws -> T {
        if T.self == JSON.self, let json = v as? T { return json }
        return try T(from: ValueDecoder(value: v, codingPath: path, usage: usage))
    }
}

private struct KeyedReader<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: [String: JSON]
    let codingPath: [any CodingKey]
    let usage: Usage?
    let reads: Usage.Reads

    var allKeys: [Key] { object.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool {
        reads.keys.insert(key.stringValue)
        return object[key.stringValue] != nil
    }

    private func value(_ key: Key) throws -> JSON {
        reads.keys.insert(key.stringValue)
        guard let v = object[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "missing"))
        }
        return v
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        reads.keys.insert(key.stringValue)
        return object[key.stringValue].map { $0 == .null } ?? true
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try Leaf.bool(value(key), codingPath + [key]) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try Leaf.string(value(key), codingPath + [key]) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try Leaf.double(value(key), codingPath + [key]) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try Leaf.double(value(key), codingPath + [key])) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try Leaf.integer(value(key), codingPath + [key]) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try Leaf.integer(value(key), codingPath + [key]) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try Leaf.integer(value(key), codingPath + [key]) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try Leaf.integer(value(key), codingPath + [key]) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try Leaf.integer(value(key), codingPath + [key]) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try Leaf.integer(value(key), codingPath + [key]) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try Leaf.integer(value(key), codingPath + [key]) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try Leaf.integer(value(key), codingPath + [key]) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try Leaf.integer(value(key), codingPath + [key]) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try Leaf.integer(value(key), codingPath + [key]) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try Leaf.decode(type, value(key), codingPath + [key], usage)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try ValueDecoder(value: value(key), codingPath: codingPath + [key], usage: usage).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try ValueDecoder(value: value(key), codingPath: codingPath + [key], usage: usage).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        ValueDecoder(value: object["super"] ?? .null, codingPath: codingPath, usage: usage)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        ValueDecoder(value: try value(key), codingPath: codingPath + [key], usage: usage)
    }
}

private struct UnkeyedReader: UnkeyedDecodingContainer {
    let array: [JSON]
    let codingPath: [any CodingKey]
    let usage: Usage?
    var currentIndex = 0

    init(array: [JSON], codingPath: [any CodingKey], usage: Usage?) {
        self.array = array
        self.codingPath = codingPath
        self.usage = usage
    }

    var count: Int? { array.count }
    var isAtEnd: Bool { currentIndex >= array.count }

    private mutating func next() throws -> (JSON, [any CodingKey]) {
        let path = codingPath + [JSONIndexKey(currentIndex)]
        guard currentIndex < array.count else {
            throw DecodingError.valueNotFound(JSON.self, .init(codingPath: path, debugDescription: "the array ends"))
        }
        defer { currentIndex += 1 }
        return (array[currentIndex], path)
    }

    mutating func decodeNil() throws -> Bool {
        guard currentIndex < array.count, array[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { let (v, p) = try next(); return try Leaf.bool(v, p) }
    mutating func decode(_ type: String.Type) throws -> String { let (v, p) = try next(); return try Leaf.string(v, p) }
    mutating func decode(_ type: Double.Type) throws -> Double { let (v, p) = try next(); return try Leaf.double(v, p) }
    mutating func decode(_ type: Float.Type) throws -> Float { let (v, p) = try next(); return Float(try Leaf.double(v, p)) }
    mutating func decode(_ type: Int.Type) throws -> Int { let (v, p) = try next(); return try Leaf.integer(v, p) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { let (v, p) = try next(); return try Leaf.integer(v, p) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { let (v, p) = try next(); return try Leaf.integer(v, p) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { let (v, p) = try next(); return try Leaf.integer(v, p) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { let (v, p) = try next(); return try Leaf.integer(v, p) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { let (v, p) = try next(); return try Leaf.integer(v, p) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { let (v, p) = try next(); return try Leaf.integer(v, p) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { let (v, p) = try next(); return try Leaf.integer(v, p) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { let (v, p) = try next(); return try Leaf.integer(v, p) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { let (v, p) = try next(); return try Leaf.integer(v, p) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let (v, p) = try next()
        return try Leaf.decode(type, v, p, usage)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let (v, p) = try next()
        return try ValueDecoder(value: v, codingPath: p, usage: usage).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let (v, p) = try next()
        return try ValueDecoder(value: v, codingPath: p, usage: usage).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
        let (v, p) = try next()
        return ValueDecoder(value: v, codingPath: p, usage: usage)
    }
}

private struct SingleReader: SingleValueDecodingContainer {
    let value: JSON
    let codingPath: [any CodingKey]
    let usage: Usage?

    func decodeNil() -> Bool { value == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try Leaf.bool(value, codingPath) }
    func decode(_ type: String.Type) throws -> String { try Leaf.string(value, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try Leaf.double(value, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { Float(try Leaf.double(value, codingPath)) }
    func decode(_ type: Int.Type) throws -> Int { try Leaf.integer(value, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try Leaf.integer(value, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try Leaf.integer(value, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try Leaf.integer(value, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try Leaf.integer(value, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try Leaf.integer(value, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try Leaf.integer(value, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try Leaf.integer(value, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try Leaf.integer(value, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try Leaf.integer(value, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try Leaf.decode(type, value, codingPath, usage) }
}
