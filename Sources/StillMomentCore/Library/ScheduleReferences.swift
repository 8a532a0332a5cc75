/// What a schedule entry refers to in the library (a preset, a guided meditation) is held
/// by the record's id, not its name: renaming a preset or a meditation keeps the entry
/// working, and an entry whose preset or meditation was deleted is found and shown broken
/// at once (list, ring-now), not when it is due. Deleting what entries use needs `force`.
import FoundationEssentials
import GRDB

/// A reference to a preset or a meditation: its id, and its name (as typed, until the
/// entry is bound; then the record's name when last read).
public struct LibraryRef: Sendable, Equatable, Codable {
    /// nil: not bound (as typed), or a legacy name that named nothing when it was migrated.
    public var id: String?
    public var name: String

    public init(id: String?, name: String) {
        self.id = id
        self.name = name
    }

    /// A name as typed (the command line, a timetable file), to be bound by `ScheduleStore.bind`.
    public static func named(_ name: String) -> LibraryRef { LibraryRef(id: nil, name: name) }

    enum CodingKeys: String, CodingKey { case id, name }

    /// Rows written before references (version 7 and older) hold the name as a string.
    public init(from decoder: any Decoder) throws {
        if let text = try? decoder.singleValueContainer().decode(String.self) {
            self.init(id: nil, name: text)
            return
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(id: try c.decodeIfPresent(String.self, forKey: .id), name: try c.decode(String.self, forKey: .name))
    }
}

/// Why an entry cannot run.
public enum ScheduleProblem: Sendable, Equatable {
    case presetGone(String)
    case meditationGone(String)

    /// The problem in both languages.
    public var words: LocalizedText { LocalizedText(en: text(.en), de: text(.de)) }

    public func text(_ language: Language = .current) -> String {
        switch (self, language) {
        case (.presetGone(let n), .de): return "die Vorlage '\(Display.clean(n))' wurde gelöscht"
        case (.presetGone(let n), _): return "the preset '\(Display.clean(n))' was deleted"
        case (.meditationGone(let n), .de): return "die Meditation '\(Display.clean(n))' wurde gelöscht"
        case (.meditationGone(let n), _): return "the meditation '\(Display.clean(n))' was deleted"
        }
    }
}

extension ScheduleStore {
    /// Binds the names an action was typed with to the records they name now (a preset by
    /// its name, a meditation by id, prefix or name), and checks the action as it would
    /// run: a timer against the settings and the sounds, a bell's sound. Throws what is wrong.
    public func bind(_ action: ScheduleAction) throws(CoreError) -> ScheduleAction {
        try bind(action, catalog: try SoundCatalog.withCustomSounds(store: store), settings: try Settings.load())
    }

    /// As `bind(_:)`, with the sounds and the settings read once by the caller (a
    /// timetable of many lines reads them once, not once a line).
    public func bind(_ action: ScheduleAction, catalog: SoundCatalog, settings: Settings) throws(CoreError) -> ScheduleAction {
        switch action {
        case .timer(let ref, let request):
            let preset = try ref.map { (r) throws(CoreError) in try PresetStore(store: store).require(r.name) }
            _ = try TimerConfiguration(settings: settings, preset: preset, options: request, catalog: catalog)
            return .timer(preset: preset.map { LibraryRef(id: $0.id, name: $0.name) }, request: request)
        case .play(let ref):
            let m = try store.find(ref.name)
            return .play(meditation: LibraryRef(id: m.id, name: m.name))
        case .bell(let sound, _, _):
            _ = try catalog.gong(sound)
            return action
        }
    }

    /// The entries whose action refers to `id` (a preset's or a meditation's).
    public func entries(using id: String) throws(CoreError) -> [ScheduleEntry] {
        try all().filter { e in e.action.references.contains { $0.id == id } }
    }

    /// The error for deleting something entries use (exit 2; `force` deletes anyway).
    public static func inUse(_ what: LocalizedText, by entries: [ScheduleEntry]) -> CoreError {
        .inUse(what: what, entries: entries.map { "\($0.id)" + ($0.name.map { " (\($0))" } ?? "") })
    }

    /// Before `id` is deleted: the entries that use it keep its name as it is now, so that
    /// they say what was deleted (renames since they were added included).
    func keepName(_ name: String, of id: String, in entries: [ScheduleEntry]) throws(CoreError) {
        var rows: [(Int64, String)] = []
        for e in entries {
            var action = e.action
            switch action {
            case .timer(let ref?, let request) where ref.id == id: action = .timer(preset: LibraryRef(id: id, name: name), request: request)
            case .play(let ref) where ref.id == id: action = .play(meditation: LibraryRef(id: id, name: name))
            default: continue
            }
            rows.append((e.id, JSON(encoding: action).line))
        }
        let updates = rows
        try store.write { db in
            for (entry, json) in updates { try db.execute(sql: "UPDATE schedule SET action = ? WHERE id = ?", arguments: [json, entry]) }
        }
    }

    /// Sets each reference's name to its record's name now, and the entry's problem when a
    /// record is gone. One read of the names, whatever the number of entries.
    static func resolve(_ entries: [ScheduleEntry], _ db: Database) throws -> [ScheduleEntry] {
        // An entry for other sync devices only is listed here and never rings here.
        let me = try SyncJournal.deviceName(db).lowercased()
        let entries = entries.map { e in
            var e = e
            e.elsewhere = e.devices.map { !$0.contains { $0.lowercased() == me } } ?? false
            return e
        }
        guard entries.contains(where: { !$0.action.references.isEmpty }) else { return entries }
        var presets: [String: String] = [:], meditations: [String: String] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT id, name FROM preset WHERE id IS NOT NULL") {
            if let id = String.fromDatabaseValue(row["id"] ?? .null), let name = String.fromDatabaseValue(row["name"] ?? .null) { presets[id] = name }
        }
        let wanted = Set(entries.compactMap { e -> String? in if case .play(let m) = e.action { return m.id } else { return nil } })
        for id in wanted {
            if let name = try String.fetchOne(db, sql: "SELECT name FROM meditation WHERE id = ?", arguments: [id]) { meditations[id] = name }
        }
        return entries.map { entry in
            var e = entry
            switch e.action {
            case .timer(let ref?, let request):
                if let id = ref.id, let name = presets[id] {
                    e.action = .timer(preset: LibraryRef(id: id, name: name), request: request)
                } else {
                    e.problem = .presetGone(ref.name)
                }
            case .play(let ref):
                if let id = ref.id, let name = meditations[id] {
                    e.action = .play(meditation: LibraryRef(id: id, name: name))
                } else {
                    e.problem = .meditationGone(ref.name)
                }
            case .timer(nil, _), .bell: break
            }
            return e
        }
    }

    /// Migration v8: presets get a UUID; entries written with names are bound to the
    /// records those names name (one that names nothing stays, shown broken); a counter
    /// that every change of the timetable bumps, for the daemon to notice whoever made it.
    static func addReferences(_ db: Database) throws {
        try db.alter(table: "preset") { t in t.add(column: "id", .text) }
        for name in try String.fetchAll(db, sql: "SELECT name FROM preset") {
            try db.execute(sql: "UPDATE preset SET id = ? WHERE name = ?", arguments: [UUID().uuidString.lowercased(), name])
        }
        try db.create(index: "presetID", on: "preset", columns: ["id"], options: .unique)
        for row in try Row.fetchAll(db, sql: "SELECT id, action FROM schedule") {
            guard let id = Int64.fromDatabaseValue(row["id"] ?? .null), let json = String.fromDatabaseValue(row["action"] ?? .null),
                  let action = try? JSON.decode(ScheduleAction.self, from: json.utf8) else { continue }
            let bound: ScheduleAction
            switch action {
            case .timer(let ref?, let request) where ref.id == nil:
                let presetID = try String.fetchOne(db, sql: "SELECT id FROM preset WHERE name = ? COLLATE NOCASE", arguments: [ref.name])
                bound = .timer(preset: LibraryRef(id: presetID, name: ref.name), request: request)
            case .play(let ref) where ref.id == nil:
                let key = ref.name.lowercased()
                var ids = try String.fetchAll(db, sql: "SELECT id FROM meditation WHERE id = ?", arguments: [key])
                if ids.isEmpty { ids = try String.fetchAll(db, sql: "SELECT id FROM meditation WHERE substr(id, 1, length(?)) = ?", arguments: [key, key]) }
                if ids.count != 1 { ids = try String.fetchAll(db, sql: "SELECT id FROM meditation WHERE lower(name) = ?", arguments: [key]) }
                bound = .play(meditation: LibraryRef(id: ids.count == 1 ? ids[0] : nil, name: ref.name))
            default: continue
            }
            try db.execute(sql: "UPDATE schedule SET action = ? WHERE id = ?", arguments: [JSON(encoding: bound).line, id])
        }
        try db.execute(sql: """
            CREATE TABLE scheduleVersion (n INTEGER NOT NULL);
            INSERT INTO scheduleVersion (n) VALUES (0);
            CREATE TRIGGER scheduleAdded AFTER INSERT ON schedule BEGIN UPDATE scheduleVersion SET n = n + 1; END;
            CREATE TRIGGER scheduleRemoved AFTER DELETE ON schedule BEGIN UPDATE scheduleVersion SET n = n + 1; END;
            CREATE TRIGGER scheduleChanged AFTER UPDATE OF name, whenText, action, enabled ON schedule BEGIN UPDATE scheduleVersion SET n = n + 1; END;
            CREATE TRIGGER quietAdded AFTER INSERT ON scheduleQuiet BEGIN UPDATE scheduleVersion SET n = n + 1; END;
            CREATE TRIGGER quietRemoved AFTER DELETE ON scheduleQuiet BEGIN UPDATE scheduleVersion SET n = n + 1; END;
            CREATE TRIGGER presetRemoved AFTER DELETE ON preset BEGIN UPDATE scheduleVersion SET n = n + 1; END;
            CREATE TRIGGER meditationRemoved AFTER DELETE ON meditation BEGIN UPDATE scheduleVersion SET n = n + 1; END;
            """)
    }

    /// The timetable's change counter (every change of an entry, a quiet day, or a preset
    /// or meditation deleted bumps it), whoever made the change.
    public func version() throws(CoreError) -> Int64 {
        try store.read { db in try Int64.fetchOne(db, sql: "SELECT n FROM scheduleVersion") ?? 0 }
    }
}
