/// The library as every front-end changes and shows it: one typed edit of a meditation
/// (`MeditationEdit`), checked in one place (names by the one rule, the trim against the
/// meditation's length, gongs against the sounds), and one representation of a meditation
/// for every listing (`MeditationRecord`: times in ms, one set of names). The CLI's `edit`,
/// `list --json`, `show --json` and the web app's library routes translate to and from these.
import FoundationEssentials

/// A change to one field: set it, or clear it (`off` on the command line, null on the web).
public enum FieldChange<Value: Sendable & Equatable>: Sendable, Equatable {
    case set(Value)
    case clear
}

/// What an edit of a meditation asks; nil fields stay as they are.
public struct MeditationEdit: Sendable, Equatable {
    public var name: String?
    public var teacher: String?
    /// An album (empty or `off`: none, as the names rule reads it).
    public var album: String?
    public var trimStart: FieldChange<Int64>?
    public var trimEnd: FieldChange<Int64>?
    /// A gong's id.
    public var startGong: FieldChange<String>?
    public var endGong: FieldChange<String>?

    public init(name: String? = nil, teacher: String? = nil, album: String? = nil, trimStart: FieldChange<Int64>? = nil,
                trimEnd: FieldChange<Int64>? = nil, startGong: FieldChange<String>? = nil, endGong: FieldChange<String>? = nil) {
        self.name = name
        self.teacher = teacher
        self.album = album
        self.trimStart = trimStart
        self.trimEnd = trimEnd
        self.startGong = startGong
        self.endGong = endGong
    }

    /// The fields an edit takes, by the names every front-end uses.
    public static let fields = ["name", "teacher", "album", "trimStart", "trimEnd", "startGong", "endGong"]
}

/// A meditation as every listing shows it (CLI `--json`, the web app): times in ms.
public struct MeditationRecord: Sendable, Equatable, Codable {
    public var id: String
    public var name: String
    public var teacher: String
    public var album: String?
    /// ms
    public var duration: Int64
    /// The imported file's name.
    public var file: String
    /// When it was imported (ms since 1970).
    public var added: Int64
    public var bytes: Int64
    public var trimStart: Int64?
    public var trimEnd: Int64?
    public var startGong: String?
    public var endGong: String?
    /// Where it was last stopped (ms in the file).
    public var lastPosition: Int64?
    /// dB to -16 LUFS.
    public var loudnessGain: Double

    public init(_ m: Meditation) {
        id = m.id
        name = m.name
        teacher = m.teacher
        album = m.album
        duration = m.durationMilliseconds
        file = m.originalName
        added = Int64((m.dateAdded.timeIntervalSince1970 * 1000).rounded())
        bytes = m.size
        trimStart = m.trimStart
        trimEnd = m.trimEnd
        startGong = m.startGong
        endGong = m.endGong
        lastPosition = m.lastPosition
        loudnessGain = (m.loudnessGain * 100).rounded() / 100
    }
}

public struct LibraryService: Sendable {
    public let store: LibraryStore
    public init(store: LibraryStore) { self.store = store }

    /// Applies an edit, checked whole before anything is stored; the meditation as stored.
    @discardableResult
    public func edit(_ key: String, _ edit: MeditationEdit) throws(CoreError) -> Meditation {
        let found = try store.find(key)
        let catalog = try SoundCatalog.withCustomSounds(store: store)
        // Applied to the row as it is in the transaction that stores it (a sync may have
        // changed another field since `find`): only what this edit changes is written.
        return try store.write { db in
            guard let before = try Meditation.fetchOne(db, key: found.id) else {
                throw CoreError.notFound(key: Display.clean(key), hint: .same(""))
            }
            let m = try Self.applied(edit, to: before, catalog: catalog)
            try m.update(db)
            try SyncMeditations.record(db, m, before: before)
            return m
        }
    }

    /// The meditation with the edit applied, or why it cannot be: the one place these rules live.
    public static func applied(_ edit: MeditationEdit, to meditation: Meditation, catalog: SoundCatalog) throws(CoreError) -> Meditation {
        var m = meditation
        if let name = edit.name { m.name = try Meditation.checked(name, .name) ?? m.name }
        if let teacher = edit.teacher { m.teacher = try Meditation.checked(teacher, .teacher) ?? m.teacher }
        if let album = edit.album { m.album = try Meditation.checked(album, .album) }
        let length = m.durationMilliseconds
        func trim(_ change: FieldChange<Int64>?, _ field: String, _ current: Int64?) throws(CoreError) -> Int64? {
            switch change {
            case nil: return current
            case .clear?: return nil
            case .set(let ms)?:
                guard ms >= 0 else {
                    throw CoreError.badValue(option: field, reason: both("a time in the meditation is not negative", "eine Zeit in der Meditation ist nicht negativ"))
                }
                guard ms <= length else {
                    throw CoreError.badValue(option: field, reason: both(
                        "\(TimeText.clock(ms)) is past the end (\(TimeText.clock(length)))",
                        "\(TimeText.clock(ms)) liegt hinter dem Ende (\(TimeText.clock(length)))"))
                }
                return ms
            }
        }
        m.trimStart = try trim(edit.trimStart, "trimStart", m.trimStart)
        m.trimEnd = try trim(edit.trimEnd, "trimEnd", m.trimEnd)
        guard (m.trimStart ?? 0) < (m.trimEnd ?? length) else {
            let range = "\(TimeText.clock(m.trimStart ?? 0)) – \(TimeText.clock(m.trimEnd ?? length))"
            throw CoreError.badRequest(both("the trim range is empty: \(range)", "der Zuschnitt ist leer: \(range)"))
        }
        func gong(_ change: FieldChange<String>?, _ current: String?) throws(CoreError) -> String? {
            switch change {
            case nil: return current
            case .clear?: return nil
            case .set(let id)?: return try catalog.gong(id).id
            }
        }
        m.startGong = try gong(edit.startGong, m.startGong)
        m.endGong = try gong(edit.endGong, m.endGong)
        return m
    }
}
