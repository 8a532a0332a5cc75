// Encodable values as JSON values, without Foundation: what goes on the wire, into an
// export or into a stored settings file is built here and written once by JSONWriter.
// A nil optional is left out (as encodeIfPresent asks); a non-finite number is refused.

public enum JSONValueEncoder {
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let path: String
        public let reason: String
        public var description: String { path.isEmpty ? reason : "\(path): \(reason)" }
    }

    /// `language`: write every `LocalizedText` in it (an answer to one client); nil: both.
    public static func encode(_ value: some Encodable, language: Language? = nil) throws(Failure) -> JSON {
        if let json = value as? JSON { return json }
        let root = Slot()
        let context = Context(language: language)
        do { try value.encode(to: ValueEncoder(slot: root, codingPath: [], context: context)) } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(path: "", reason: "\(error)")
        }
        return root.json
    }
}

/// What every encoder of one encode shares: the language texts are written in.
private struct Context {
    let language: Language?
    var userInfo: [CodingUserInfoKey: Any] { language.map { [.language: $0] } ?? [:] }
}

/// One value being built: a leaf, an object or an array of further slots.
private final class Slot {
    var leaf: JSON?
    var object: [String: Slot]?
    var array: [Slot]?

    var json: JSON {
        if let object { return .object(object.mapValues(\.json)) }
        if let array { return .array(array.map(\.json)) }
        return leaf ?? .object([:])
    }

    func makeObject() {
        if object == nil { object = [:]; array = nil; leaf = nil }
    }

    func makeArray() {
        if array == nil { array = []; object = nil; leaf = nil }
    }

    func child(_ key: String) -> Slot {
        makeObject()
        let s = Slot()
        object?[key] = s
        return s
    }

    func appended() -> Slot {
        makeArray()
        let s = Slot()
        array?.append(s)
        return s
    }

    func set(_ value: JSON) {
        leaf = value
        object = nil
        array = nil
    }
}

private func path(_ codingPath: [any CodingKey]) -> String {
    codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
}

private func number(_ d: Double, _ codingPath: [any CodingKey]) throws(JSONValueEncoder.Failure) -> JSON {
    guard d.isFinite else { throw JSONValueEncoder.Failure(path: path(codingPath), reason: "JSON has no \(d)") }
    return .number(d)
}

/// Encodes `value` into `slot`: a JSON as it is, anything else through its own encode(to:).
private func put(_ value: some Encodable, into slot: Slot, _ codingPath: [any CodingKey], _ context: Context) throws {
    if let json = value as? JSON {
        slot.set(json)
        return
    }
    try value.encode(to: ValueEncoder(slot: slot, codingPath: codingPath, context: context))
}

private struct ValueEncoder: Encoder {
    let slot: Slot
    let codingPath: [any CodingKey]
    let context: Context
    var userInfo: [CodingUserInfoKey: Any] { context.userInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        slot.makeObject()
        return KeyedEncodingContainer(KeyedSlot<Key>(slot: slot, codingPath: codingPath, context: context))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        slot.makeArray()
        return UnkeyedSlot(slot: slot, codingPath: codingPath, context: context)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleSlot(slot: slot, codingPath: codingPath, context: context) }
}

private struct KeyedSlot<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let slot: Slot
    let codingPath: [any CodingKey]
    let context: Context

    private func leaf(_ value: JSON, _ key: Key) { slot.child(key.stringValue).set(value) }

    mutating func encodeNil(forKey key: Key) throws { leaf(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { leaf(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { leaf(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { leaf(try number(value, codingPath + [key]), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { leaf(try number(Double(value), codingPath + [key]), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { leaf(.number(Double(value)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { leaf(.number(Double(value)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { leaf(.number(Double(value)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { leaf(.number(Double(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { leaf(.number(Double(value)), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { leaf(.number(Double(value)), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { leaf(.number(Double(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { leaf(.number(Double(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { leaf(.number(Double(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { leaf(.number(Double(value)), key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try put(value, into: slot.child(key.stringValue), codingPath + [key], context)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = slot.child(key.stringValue)
        child.makeObject()
        return KeyedEncodingContainer(KeyedSlot<NestedKey>(slot: child, codingPath: codingPath + [key], context: context))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = slot.child(key.stringValue)
        child.makeArray()
        return UnkeyedSlot(slot: child, codingPath: codingPath + [key], context: context)
    }

    mutating func superEncoder() -> any Encoder { ValueEncoder(slot: slot.child("super"), codingPath: codingPath, context: context) }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        ValueEncoder(slot: slot.child(key.stringValue), codingPath: codingPath + [key], context: context)
    }
}

private struct UnkeyedSlot: UnkeyedEncodingContainer {
    let slot: Slot
    let codingPath: [any CodingKey]
    let context: Context
    var count: Int { slot.array?.count ?? 0 }

    private func leaf(_ value: JSON) { slot.appended().set(value) }
    private var here: [any CodingKey] { codingPath + [JSONIndexKey(count)] }

    mutating func encodeNil() throws { leaf(.null) }
    mutating func encode(_ value: Bool) throws { leaf(.bool(value)) }
    mutating func encode(_ value: String) throws { leaf(.string(value)) }
    mutating func encode(_ value: Double) throws { leaf(try number(value, here)) }
    mutating func encode(_ value: Float) throws { leaf(try number(Double(value), here)) }
    mutating func encode(_ value: Int) throws { leaf(.number(Double(value))) }
    mutating func encode(_ value: Int8) throws { leaf(.number(Double(value))) }
    mutating func encode(_ value: Int16) throws { leaf(.number(Double(value))) }
    mutating func encode(_ value: Int32) throws { leaf(.number(Double(value))) }
    mutating func encode(_ value: Int64) throws { leaf(.number(Double(value))) }
    mutating func encode(_ value: UInt) throws { leaf(.number(Double(value))) }
    mutating func encode(_ value: UInt8) throws { leaf(.number(Double(value))) }
    mutating func encode(_ value: UInt16) throws { leaf(.number(Double(value))) }
    mutating func encode(_ value: UInt32) throws { leaf(.number(Double(value))) }
    mutating func encode(_ value: UInt64) throws { leaf(.number(Double(value))) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        let path = here
        try put(value, into: slot.appended(), path, context)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = here
        let child = slot.appended()
        child.makeObject()
        return KeyedEncodingContainer(KeyedSlot<NestedKey>(slot: child, codingPath: path, context: context))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = here
        let child = slot.appended()
        child.makeArray()
        return UnkeyedSlot(slot: child, codingPath: path, context: context)
    }

    mutating func superEncoder() -> any Encoder {
        let path = here
        return ValueEncoder(slot: slot.appended(), codingPath: path, context: context)
    }
}

private struct SingleSlot: SingleValueEncodingContainer {
    let slot: Slot
    let codingPath: [any CodingKey]
    let context: Context

    mutating func encodeNil() throws { slot.set(.null) }
    mutating func encode(_ value: Bool) throws { slot.set(.bool(value)) }
    mutating func encode(_ value: String) throws { slot.set(.string(value)) }
    mutating func encode(_ value: Double) throws { slot.set(try number(value, codingPath)) }
    mutating func encode(_ value: Float) throws { slot.set(try number(Double(value), codingPath)) }
    mutating func encode(_ value: Int) throws { slot.set(.number(Double(value))) }
    mutating func encode(_ value: Int8) throws { slot.set(.number(Double(value))) }
    mutating func encode(_ value: Int16) throws { slot.set(.number(Double(value))) }
    mutating func encode(_ value: Int32) throws { slot.set(.number(Double(value))) }
    mutating func encode(_ value: Int64) throws { slot.set(.number(Double(value))) }
    mutating func encode(_ value: UInt) throws { slot.set(.number(Double(value))) }
    mutating func encode(_ value: UInt8) throws { slot.set(.number(Double(value))) }
    mutating func encode(_ value: UInt16) throws { slot.set(.number(Double(value))) }
    mutating func encode(_ value: UInt32) throws { slot.set(.number(Double(value))) }
    mutating func encode(_ value: UInt64) throws { slot.set(.number(Double(value))) }
    mutating func encode<T: Encodable>(_ value: T) throws { try put(value, into: slot, codingPath, context) }
}
