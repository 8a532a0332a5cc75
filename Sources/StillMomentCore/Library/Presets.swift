/// Saved timer presets, in the catalog database: a name and the typed request it stands
/// for. Checked when saved (an unknown sound or a bad value is refused then, not on some
/// morning later); a preset naming a custom sound that was removed says so when used.
import FoundationEssentials
import GRDB

public struct Preset: Sendable, Equatable, Codable {
    /// Stable across renames: what schedule entries refer to.
    public var id: String
    public var name: String
    public var request: TimerRequest
    public var created: Date
    public var updated: Date
}

public struct PresetStore: Sendable {
    public let store: LibraryStore
    public init(store: LibraryStore) { self.store = store }

    static func createTables(_ db: Database) throws {
        try db.create(table: "preset") { t in
            t.primaryKey("name", .text).collate(.nocase)
            t.column("request", .text).notNull()         // the TimerRequest as JSON
            t.column("created", .double).notNull()
            t.column("updated", .double).notNull()
        }
    }

    public static let maximumNameLength = 60

    /// A preset's name: 1 to 60 characters (the one rule for names), no leading dash.
    public static func checkName(_ raw: String) throws(CoreError) -> String {
        let name = try Names.check(raw, option: "", maxLength: maximumNameLength)
        guard !name.hasPrefix("-") else {
            throw CoreError.badValue(option: "", reason: both("'\(Display.clean(name))' is not a preset name: it cannot start with '-'",
                                                           "'\(Display.clean(name))' ist kein Vorlagenname: er kann nicht mit '-' beginnen"))
        }
        return name
    }

    /// Saves (or replaces) a preset after checking that it makes a valid timer.
    public func save(_ name: String, request: TimerRequest, catalog: SoundCatalog) throws(CoreError) -> Preset {
        let name = try Self.checkName(name)
        var check = request
        check.device = nil
        _ = try TimerConfiguration(request: check, catalog: catalog)
        let json = JSON(encoding: request).line
        let now = Date().timeIntervalSince1970
        try store.write { db in
            let before = try Row.fetchOne(db, sql: "SELECT * FROM preset WHERE name = ?", arguments: [name]).flatMap(Self.preset)
            try db.execute(sql: """
                INSERT INTO preset (id, name, request, created, updated) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(name) DO UPDATE SET request = excluded.request, updated = excluded.updated
                """, arguments: [UUID().uuidString.lowercased(), name, json, now, now])
            if let row = try Row.fetchOne(db, sql: "SELECT * FROM preset WHERE name = ?", arguments: [name]), let saved = Self.preset(row) {
                // Only what changed gets a new stamp (a save of the timer must not undo a
                // rename made meanwhile on another device).
                try SyncRecords.recordPreset(db, saved, before: before)
                try SyncRecords.applyPresets(db)
            }
        }
        guard let saved = try find(name) else { throw CoreError.io(path: store.databasePath, reason: .same("the preset was not saved")) }
        return saved
    }

    public func all() throws(CoreError) -> [Preset] {
        try store.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM preset ORDER BY name COLLATE NOCASE").compactMap(Self.preset)
        }
    }

    public func find(_ name: String) throws(CoreError) -> Preset? {
        let key = name.trimmingWhitespace()
        return try store.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM preset WHERE name = ?", arguments: [key]).flatMap(Self.preset)
        }
    }

    /// The preset with this id (what schedule entries hold), nil when it was deleted.
    public func find(id: String) throws(CoreError) -> Preset? {
        try store.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM preset WHERE id = ?", arguments: [id]).flatMap(Self.preset)
        }
    }

    /// The preset, or a one-line error that lists the presets there are.
    public func require(_ name: String) throws(CoreError) -> Preset {
        if let p = try find(name) { return p }
        let names = try all().map(\.name)
        throw CoreError.badValue(option: "--preset", reason: both(
            "no preset '\(Display.clean(name))'" + (names.isEmpty ? " (there are none yet: `stillmoment preset save NAME …`)" : "; the presets are: \(names.joined(separator: ", "))"),
            "keine Vorlage '\(Display.clean(name))'" + (names.isEmpty ? " (es gibt noch keine: `stillmoment preset save NAME …`)" : "; es gibt: \(names.joined(separator: ", "))")))
    }

    public func rename(_ old: String, to new: String) throws(CoreError) {
        let target = try Self.checkName(new)
        let preset = try require(old)
        if target.lowercased() != preset.name.lowercased(), try find(target) != nil {
            throw CoreError.badValue(option: "", reason: both("a preset '\(target)' exists already", "eine Vorlage '\(target)' gibt es schon"))
        }
        let from = preset.name
        try store.write { db in
            try db.execute(sql: "UPDATE preset SET name = ?, updated = ? WHERE name = ?",
                           arguments: [target, Date().timeIntervalSince1970, from])
            try SyncJournal.record(db, .preset, id: preset.id, fields: [("name", JSON.string(target).line)])
            try SyncRecords.applyPresets(db)
        }
    }

    /// Deletes a preset; one that schedule entries use only with `force` (they then show
    /// as broken), else the error names them.
    public func delete(_ name: String, force: Bool = false) throws(CoreError) {
        let preset = try require(name)
        let users = try ScheduleStore(store: store).entries(using: preset.id)
        if !users.isEmpty && !force {
            throw ScheduleStore.inUse(both("the preset '\(Display.clean(preset.name))'", "die Vorlage '\(Display.clean(preset.name))'"), by: users)
        }
        try ScheduleStore(store: store).keepName(preset.name, of: preset.id, in: users)
        let key = preset.name, id = preset.id
        try store.write { db in
            try db.execute(sql: "DELETE FROM preset WHERE name = ?", arguments: [key])
            try SyncJournal.recordDelete(db, .preset, id: id)
            try SyncRecords.applyPresets(db)
        }
    }

    static func preset(_ row: Row) -> Preset? {
        guard let id = String.fromDatabaseValue(row["id"] ?? .null), let name = String.fromDatabaseValue(row["name"] ?? .null),
              let json = String.fromDatabaseValue(row["request"] ?? .null),
              let request = try? JSON.decode(TimerRequest.self, from: json.utf8) else { return nil }
        let created = Double.fromDatabaseValue(row["created"] ?? .null) ?? 0
        let updated = Double.fromDatabaseValue(row["updated"] ?? .null) ?? created
        return Preset(id: id, name: name, request: request, created: Date(timeIntervalSince1970: created),
                      updated: Date(timeIntervalSince1970: updated))
    }
}

extension TimerRequest {
    /// The request a sit runs: the settings, the preset (if named), then the options given
    /// for this sit (a sit in several rooms sends this, resolved, to the other nodes).
    public init(settings: Settings, preset: Preset?, options: TimerRequest) throws(CoreError) {
        var request = try TimerRequest(text: settings.timerValues)
        if let preset { request = request.overlaid(by: preset.request) }
        self = request.overlaid(by: options)
    }
}

extension TimerConfiguration {
    /// The timer a sit runs: the defaults, the settings, the preset (if named), then the
    /// options given for this sit. A sound the preset names that is gone says so.
    public init(settings: Settings, preset: Preset?, options: TimerRequest, catalog: SoundCatalog) throws(CoreError) {
        let request = try TimerRequest(settings: settings, preset: preset, options: options)
        do {
            try self.init(request: request, catalog: catalog)
        } catch {
            if let preset, case .unknownSound(let id, let kind, _) = error,
               [preset.request.gong, preset.request.intervalGong, preset.request.ambience, preset.request.sectionGong].contains(id) {
                throw CoreError.badValue(option: "--preset", reason: both(
                    "the preset '\(preset.name)' names the \(kind) '\(id)', which was removed; save it again with another",
                    "die Vorlage '\(preset.name)' nennt den Klang '\(id)' (\(kind)), den es nicht mehr gibt; speichere sie mit einem anderen neu"))
            }
            throw error
        }
    }
}
