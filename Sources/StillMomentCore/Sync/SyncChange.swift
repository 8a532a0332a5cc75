/// What travels between a hub and its devices: one field of one record, with the stamp of
/// the change that set it (a last-writer-wins register per field, decided by the hybrid
/// clock). A delete is the field `deleted` of the record: it wins over every older change of
/// the record and loses to a newer one (an edit after a delete brings the record back, with
/// all its fields, which are kept). Everything from a peer is checked here before anything
/// is stored: the kind and field from a fixed list, the id a UUID, the value bounded and
/// read by the kind's own rules (SyncRecords), the stamp well formed.
import FoundationEssentials

/// The kinds of record that sync, and their fields.
public enum SyncKind: String, Sendable, CaseIterable, Codable {
    case preset
    case practice
    case meditation
    case sound
    case schedule
    case setting

    /// The fields a record of this kind has (besides `deleted`).
    public var fields: Set<String> {
        switch self {
        case .preset: return ["name", "request", "created"]
        case .practice: return ["entry"]
        case .meditation: return Set(["file"] + SyncMeditations.editFields)
        case .sound: return ["sound"]
        case .schedule: return ["entry", "enabled", "devices"]
        case .setting: return SyncSettings.shared
        }
    }
}

public struct SyncChange: Sendable, Equatable, Hashable, Codable {
    public var kind: SyncKind
    /// The record's UUID (lower case): the same on every device.
    public var id: String
    public var field: String
    /// The field's value as JSON text.
    public var value: String
    public var stamp: HybridTimestamp

    public static let deletedField = "deleted"
    /// The largest value a field may hold (a preset's request is under 1 KiB).
    public static let maximumValueBytes = 16 * 1024

    public init(kind: SyncKind, id: String, field: String, value: String, stamp: HybridTimestamp) {
        self.kind = kind
        self.id = id
        self.field = field
        self.value = value
        self.stamp = stamp
    }

    enum CodingKeys: String, CodingKey { case kind = "k", id = "i", field = "f", value = "v", stamp = "h" }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let kindText = try c.decode(String.self, forKey: .kind)
        guard let kind = SyncKind(rawValue: kindText) else {
            throw SyncError.refused(both("unknown kind '\(Display.clean(String(kindText.prefix(40))))'",
                                         "unbekannte Art '\(Display.clean(String(kindText.prefix(40))))'"))
        }
        let stampText = try c.decode(String.self, forKey: .stamp)
        guard let stamp = HybridTimestamp(text: stampText) else {
            throw SyncError.refused(both("'\(Display.clean(String(stampText.prefix(80))))' is not a clock stamp",
                                         "'\(Display.clean(String(stampText.prefix(80))))' ist kein Uhrstempel"))
        }
        self.init(kind: kind, id: try c.decode(String.self, forKey: .id), field: try c.decode(String.self, forKey: .field),
                  value: try c.decode(String.self, forKey: .value), stamp: stamp)
        try check()
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(kind.rawValue, forKey: .kind)
        try c.encode(id, forKey: .id)
        try c.encode(field, forKey: .field)
        try c.encode(value, forKey: .value)
        try c.encode(stamp.description, forKey: .stamp)
    }

    /// The checks of the form: id, field, the value's size and, for a delete, its value.
    /// What the value says is read by `SyncRecords` when the record is applied.
    public func check() throws(SyncError) {
        guard StoredName.isUUID(Substring(id)) else {
            throw .refused(both("'\(Display.clean(String(id.prefix(40))))' is not a record id (a lower-case UUID)",
                                "'\(Display.clean(String(id.prefix(40))))' ist keine Satzkennung (eine UUID in Kleinbuchstaben)"))
        }
        guard field == Self.deletedField || kind.fields.contains(field) else {
            throw .refused(both("a \(kind.rawValue) has no field '\(Display.clean(String(field.prefix(40))))'",
                                "ein Satz der Art \(kind.rawValue) hat kein Feld '\(Display.clean(String(field.prefix(40))))'"))
        }
        guard value.utf8.count <= Self.maximumValueBytes else {
            throw .refused(both("a field of \(value.utf8.count) bytes (at most \(Self.maximumValueBytes))",
                                "ein Feld von \(value.utf8.count) Bytes (höchstens \(Self.maximumValueBytes))"))
        }
        if field == Self.deletedField && value != "true" {
            throw .refused(both("a delete's value is true", "der Wert eines Löschens ist true"))
        }
    }
}

/// Why sync refused something or could not go on.
public enum SyncError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A peer sent something that is not ours (the batch is refused whole, nothing stored).
    case refused(LocalizedText)
    /// A stamp too far past this node's clock: the peer's clock (or ours) needs setting.
    case clockAhead(node: String, milliseconds: Int64)
    /// The store could not be read or written.
    case store(CoreError)
    /// The hub could not be reached, or its answer broke off (the next cycle tries again).
    case unreachable(LocalizedText)
    /// Another cycle of this home runs: this one did nothing.
    case busy
    /// The cycle was asked to stop (the daemon is ending): what it did is kept.
    case stopped

    public var description: String { text(.current) }

    public func text(_ language: Language) -> String {
        switch self {
        case .refused(let words): return Display.clean(words.text(language))
        case .clockAhead(let node, let ms):
            let minutes = Double(ms) / 60_000
            let shown = minutes >= 10_000 ? ">10000" : String(Int(minutes.rounded()))
            return tr("a change stamped \(shown) min ahead of this clock (node \(node.prefix(8))): set that device's clock (chrony or NTP); changes more than 5 min ahead are refused",
                      "eine Änderung \(shown) min vor dieser Uhr (Knoten \(node.prefix(8))): stelle die Uhr dieses Geräts (chrony oder NTP); Änderungen mehr als 5 min voraus werden abgelehnt", language)
        case .store(let error): return error.text(language)
        case .unreachable(let words): return Display.clean(words.text(language))
        case .busy: return tr("another sync of this library is running (the daemon's?): try again in a moment",
                              "ein anderer Abgleich dieser Bibliothek läuft (der des Daemons?): gleich noch einmal versuchen", language)
        case .stopped: return tr("the sync was stopped (the daemon is ending)", "der Abgleich wurde angehalten (der Daemon endet)", language)
        }
    }

    public var words: LocalizedText { LocalizedText(en: text(.en), de: text(.de)) }
}

extension SyncError {
    /// The error's code on the wire.
    public var code: String {
        switch self {
        case .refused: return "sync-refused"
        case .clockAhead: return "clock-ahead"
        case .store: return "failed"
        case .unreachable: return "unreachable"
        case .busy: return "busy"
        case .stopped: return "stopped"
        }
    }
}

extension SyncChange {
    /// A list of changes from a peer: each read strictly, except that a change of a kind
    /// this version does not know (a newer peer's: meditations, schedules) is passed over,
    /// so a device and a hub of different versions go on syncing what both know.
    static func list<Key: CodingKey>(key: Key, in container: KeyedDecodingContainer<Key>) throws -> [SyncChange] {
        let raw = try container.decode([JSON].self, forKey: key)
        var out: [SyncChange] = []
        out.reserveCapacity(raw.count)
        for item in raw {
            if case .object(let o) = item, let kind = o["k"]?.string, SyncKind(rawValue: kind) == nil,
               kind.utf8.count <= 40, kind.utf8.allSatisfy({ $0 >= 0x61 && $0 <= 0x7a || $0 == 0x2d }) { continue }
            out.append(try JSONValueDecoder.decode(SyncChange.self, from: item, strict: true))
        }
        return out
    }
}

/// A page of a hub's changes, as a device reads it.
public struct SyncPage: Sendable, Equatable, Codable {
    public var hub: String
    public var changes: [SyncChange]
    /// The cursor to ask from next.
    public var next: Int64
    public var more: Bool
    /// The hub's wall clock when it answered (ms since 1970): the stamps it sends are checked
    /// against it, as it checked them when it took them.
    public var time: Int64
    /// The last sequence number the hub has given (nil: an older hub).
    public var last: Int64?
    /// The hub's journal's epoch: a new one each time the hub finds a device that has read
    /// past its last change (it was restored from an older backup). A device that sees
    /// another epoch than the one it knows reads the hub from the start and sends it
    /// everything it holds (nil: an older hub).
    public var epoch: String?
    public init(hub: String, changes: [SyncChange], next: Int64, more: Bool, time: Int64, last: Int64? = nil, epoch: String? = nil) {
        self.hub = hub
        self.time = time
        self.changes = changes
        self.next = next
        self.more = more
        self.last = last
        self.epoch = epoch
    }

    enum CodingKeys: String, CodingKey { case hub, changes, next, more, time, last, epoch }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(hub: try c.decode(String.self, forKey: .hub), changes: try SyncChange.list(key: CodingKeys.changes, in: c),
                  next: try c.decode(Int64.self, forKey: .next), more: try c.decode(Bool.self, forKey: .more),
                  time: try c.decode(Int64.self, forKey: .time), last: try c.decodeIfPresent(Int64.self, forKey: .last),
                  epoch: try c.decodeIfPresent(String.self, forKey: .epoch))
    }
}

/// A device's upload of changes.
public struct SyncUpload: Sendable, Codable {
    public var node: String
    public var changes: [SyncChange]
    /// Where the device has read the hub to (a hub behind it was restored: see `epoch`).
    public var cursor: Int64?
    public init(node: String, changes: [SyncChange], cursor: Int64? = nil) {
        self.node = node
        self.changes = changes
        self.cursor = cursor
    }

    enum CodingKeys: String, CodingKey { case node, changes, cursor }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(node: try c.decode(String.self, forKey: .node), changes: try SyncChange.list(key: CodingKeys.changes, in: c),
                  cursor: try c.decodeIfPresent(Int64.self, forKey: .cursor))
    }
}
