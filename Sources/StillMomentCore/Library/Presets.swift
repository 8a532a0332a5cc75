/// Saved timer presets, in the catalog database: a name and the typed request it stands
/// for. Checked when saved (an unknown sound or a bad value is refused then, not on some
/// morning later); a preset naming a custom sound that was removed says so when used.
import FoundationEssentials
import GRDB

public struct Preset: Sendable, Equatable, Codable {
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

    /// A preset's name: 1 to 60 characters, no control characters, no leading dash.
    public static func checkName(_ raw: String) throws(CoreError) -> String {
        let name = raw.trimmingWhitespace()
        guard !name.isEmpty, name.count <= 60, !name.hasPrefix("-"),
              !name.unicodeScalars.contains(where: Display.isControl) else {
            throw CoreError.badValue(option: "", reason: Language.current == .de
                ? "'\(Display.clean(String(raw.prefix(60))))' ist kein Vorlagenname (1 bis 60 Zeichen, ohne Steuerzeichen)"
                : "'\(Display.clean(String(raw.prefix(60))))' is not a preset name (1 to 60 characters, no control characters)")
        }
        return name
    }

    /// Saves (or replaces) a preset after checking that it makes a valid timer.
    public func save(_ name: String, request: TimerRequest, catalog: SoundCatalog) throws(CoreError) -> Preset {
        let name = try Self.checkName(name)
        var check = request
        check.device = nil
        _ = try TimerConfiguration(request: check, catalog: catalog)
        guard let data = try? JSONEncoder().encode(request) else { throw CoreError.io(path: "", reason: "cannot encode the preset") }
        let json = String(decoding: data, as: UTF8.self)
        let now = Date().timeIntervalSince1970
        try store.write { db in
            try db.execute(sql: """
                INSERT INTO preset (name, request, created, updated) VALUES (?, ?, ?, ?)
                ON CONFLICT(name) DO UPDATE SET request = excluded.request, updated = excluded.updated
                """, arguments: [name, json, now, now])
        }
        guard let saved = try find(name) else { throw CoreError.io(path: store.databasePath, reason: "the preset was not saved") }
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

    /// The preset, or a one-line error that lists the presets there are.
    public func require(_ name: String) throws(CoreError) -> Preset {
        if let p = try find(name) { return p }
        let names = try all().map(\.name)
        throw CoreError.badValue(option: "--preset", reason: Language.current == .de
            ? "keine Vorlage '\(Display.clean(name))'" + (names.isEmpty ? " (es gibt noch keine: `stillmoment preset save NAME …`)" : "; es gibt: \(names.joined(separator: ", "))")
            : "no preset '\(Display.clean(name))'" + (names.isEmpty ? " (there are none yet: `stillmoment preset save NAME …`)" : "; the presets are: \(names.joined(separator: ", "))"))
    }

    public func rename(_ old: String, to new: String) throws(CoreError) {
        let target = try Self.checkName(new)
        let preset = try require(old)
        if target.lowercased() != preset.name.lowercased(), try find(target) != nil {
            throw CoreError.badValue(option: "", reason: "a preset '\(target)' exists already")
        }
        let from = preset.name
        try store.write { db in
            try db.execute(sql: "UPDATE preset SET name = ?, updated = ? WHERE name = ?",
                           arguments: [target, Date().timeIntervalSince1970, from])
        }
    }

    public func delete(_ name: String) throws(CoreError) {
        let preset = try require(name)
        let key = preset.name
        try store.write { db in try db.execute(sql: "DELETE FROM preset WHERE name = ?", arguments: [key]) }
    }

    static func preset(_ row: Row) -> Preset? {
        guard let name = String.fromDatabaseValue(row["name"] ?? .null),
              let json = String.fromDatabaseValue(row["request"] ?? .null),
              let request = try? JSONDecoder().decode(TimerRequest.self, from: Data(json.utf8)) else { return nil }
        let created = Double.fromDatabaseValue(row["created"] ?? .null) ?? 0
        let updated = Double.fromDatabaseValue(row["updated"] ?? .null) ?? created
        return Preset(name: name, request: request, created: Date(timeIntervalSince1970: created),
                      updated: Date(timeIntervalSince1970: updated))
    }
}

extension TimerConfiguration {
    /// The timer a sit runs: the defaults, the settings, the preset (if named), then the
    /// options given for this sit. A sound the preset names that is gone says so.
    public init(settings: Settings, preset: Preset?, options: TimerRequest, catalog: SoundCatalog) throws(CoreError) {
        var request = try TimerRequest(text: settings.timerValues)
        if let preset { request = request.overlaid(by: preset.request) }
        request = request.overlaid(by: options)
        do {
            try self.init(request: request, catalog: catalog)
        } catch {
            if let preset, case .unknownSound(let id, let kind, _) = error,
               [preset.request.gong, preset.request.intervalGong, preset.request.ambience, preset.request.sectionGong].contains(id) {
                throw CoreError.badValue(option: "--preset", reason: Language.current == .de
                    ? "die Vorlage '\(preset.name)' nennt den Klang '\(id)' (\(kind)), den es nicht mehr gibt; speichere sie mit einem anderen neu"
                    : "the preset '\(preset.name)' names the \(kind) '\(id)', which was removed; save it again with another")
            }
            throw error
        }
    }
}
