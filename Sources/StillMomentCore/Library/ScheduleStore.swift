/// The daemon's schedule, in the catalog database: entries (WHEN and ACTION), quiet days
/// and what happened to each occurrence (ran, missed, skipped, failed). It survives
/// restarts and reboots; the daemon only reads it and records what it did.
import FoundationEssentials
import GRDB

/// What a scheduled entry does.
public enum ScheduleAction: Sendable, Equatable, Codable, CustomStringConvertible {
    /// A sit: a preset, timer options, or both (options override the preset).
    case timer(preset: String?, request: TimerRequest)
    /// A guided meditation from the library (an id or a name).
    case play(meditation: String)
    /// A bell only: a sound struck `strikes` times at `volume` (no session, no log entry).
    case bell(sound: String, strikes: Int, volume: Double)

    public var description: String {
        switch self {
        case .timer(let preset, let request):
            let options = Self.optionText(request)
            return ([preset.map { "--preset \($0)" }].compactMap { $0 } + [options]).filter { !$0.isEmpty }.joined(separator: " ")
        case .play(let m): return "--play \(m)"
        case .bell(let sound, let strikes, let volume):
            return "--bell \(sound)" + (strikes != 1 ? " --strikes \(strikes)" : "") + (volume != 1 ? " --volume \(volume)" : "")
        }
    }

    /// A request as the options one would type (for list, export).
    public static func optionText(_ r: TimerRequest) -> String {
        var parts: [String] = []
        func add(_ o: TimerOption, _ v: String?) { if let v { parts.append("--\(o.rawValue) \(v.contains(" ") ? "\"\(v)\"" : v)") } }
        add(.duration, r.duration.map(TimeText.compact))
        add(.preparation, r.preparation.map { $0 == 0 ? "off" : TimeText.compact($0) })
        add(.gong, r.gong)
        add(.gongVolume, r.gongVolume.map { String($0) })
        add(.strikes, r.strikes.map(String.init))
        switch r.interval {
        case .off?: add(.interval, "off")
        case .on?: add(.interval, "on")
        case .every(let ms)?: add(.interval, TimeText.compact(ms))
        case nil: break
        }
        add(.intervalMode, r.intervalMode?.rawValue)
        add(.intervalGong, r.intervalGong)
        add(.intervalVolume, r.intervalVolume.map { String($0) })
        add(.bells, r.bells.map { $0.map { ($0.fromEnd ? "-" : "") + TimeText.compact($0.milliseconds) }.joined(separator: ",") })
        add(.sections, r.sections?.description)
        add(.sectionGong, r.sectionGong)
        add(.randomBells, r.randomBells.map { "\(TimeText.compact($0.minimum))-\(TimeText.compact($0.maximum))" })
        add(.seed, r.seed.map { String($0) })
        add(.ambience, r.ambience)
        add(.ambienceVolume, r.ambienceVolume.map { String($0) })
        add(.ambienceDuring, r.ambienceDuringWalks.map { $0 ? "all" : "sit" })
        add(.device, r.device?.text)
        return parts.joined(separator: " ")
    }
}

public struct ScheduleEntry: Sendable, Equatable {
    public var id: Int64
    public var name: String?
    public var when: ScheduleWhen
    public var action: ScheduleAction
    public var enabled: Bool
    /// The last occurrence handled (unix seconds; 0 = none yet).
    public var lastHandled: Int64
    /// Draws a window's random bells: the same for `upcoming` and for the daemon.
    public var seed: UInt64
}

public struct ScheduleEvent: Sendable, Equatable, Codable {
    public var entry: Int64
    public var at: Int64
    public var outcome: String        // ran, missed, skipped, failed
    public var detail: String?

    public init(entry: Int64, at: Int64, outcome: String, detail: String?) {
        self.entry = entry
        self.at = at
        self.outcome = outcome
        self.detail = detail
    }
}

public struct ScheduleStore: Sendable {
    public let store: LibraryStore
    public init(store: LibraryStore) { self.store = store }

    static func createTables(_ db: Database) throws {
        try db.create(table: "schedule") { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("name", .text)
            t.column("whenText", .text).notNull()
            t.column("action", .text).notNull()
            t.column("enabled", .boolean).notNull().defaults(to: true)
            t.column("lastHandled", .integer).notNull().defaults(to: 0)
            t.column("seed", .integer).notNull()
            t.column("created", .double).notNull()
        }
        try db.create(table: "scheduleQuiet") { t in
            t.primaryKey("date", .text)
        }
        try db.create(table: "scheduleEvent") { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("entry", .integer).notNull()
            t.column("at", .integer).notNull()
            t.column("outcome", .text).notNull()
            t.column("detail", .text)
        }
    }

    // MARK: entries

    /// Adds an entry at `now` (unix seconds): its occurrences from this very second on are
    /// due (one in the current second rings at once, not never): `lastHandled` is `now - 1`.
    @discardableResult
    public func add(when: ScheduleWhen, action: ScheduleAction, name: String?, now: Int64) throws(CoreError) -> ScheduleEntry {
        let after = now - 1
        let whenText = when.description
        guard let data = try? JSONEncoder().encode(action) else { throw CoreError.io(path: "", reason: "cannot encode the action") }
        let json = String(decoding: data, as: UTF8.self)
        let seed = Int64(bitPattern: UInt64.random(in: 0...UInt64.max))
        let count = try store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM schedule") ?? 0 }
        guard count < 1000 else { throw CoreError.badRequest("the schedule holds 1000 entries at most") }
        let id = try store.write { db -> Int64 in
            try db.execute(sql: "INSERT INTO schedule (name, whenText, action, enabled, lastHandled, seed, created) VALUES (?, ?, ?, 1, ?, ?, ?)",
                           arguments: [name, whenText, json, after, seed, Date().timeIntervalSince1970])
            return db.lastInsertedRowID
        }
        guard let entry = try find(id) else { throw CoreError.io(path: store.databasePath, reason: "the entry was not saved") }
        return entry
    }

    public func all() throws(CoreError) -> [ScheduleEntry] {
        try store.read { db in try Row.fetchAll(db, sql: "SELECT * FROM schedule ORDER BY id").compactMap(Self.entry) }
    }

    public func find(_ id: Int64) throws(CoreError) -> ScheduleEntry? {
        try store.read { db in try Row.fetchOne(db, sql: "SELECT * FROM schedule WHERE id = ?", arguments: [id]).flatMap(Self.entry) }
    }

    public func require(_ id: String) throws(CoreError) -> ScheduleEntry {
        guard let n = Int64(id.trimmingWhitespace()), let e = try find(n) else {
            throw CoreError.badValue(option: "", reason: Language.current == .de
                ? "kein Eintrag \(Display.clean(id)) im Zeitplan (siehe `stillmoment schedule list`)"
                : "no entry \(Display.clean(id)) in the schedule (see `stillmoment schedule list`)")
        }
        return e
    }

    public func remove(_ id: Int64) throws(CoreError) {
        try store.write { db in try db.execute(sql: "DELETE FROM schedule WHERE id = ?", arguments: [id]) }
    }

    public func setEnabled(_ id: Int64, _ enabled: Bool, now: Int64) throws(CoreError) {
        // Enabling again starts from now: nothing missed meanwhile rings late.
        try store.write { db in
            try db.execute(sql: "UPDATE schedule SET enabled = ?, lastHandled = CASE WHEN ? THEN max(lastHandled, ?) ELSE lastHandled END WHERE id = ?",
                           arguments: [enabled, enabled, now, id])
        }
    }

    public func handled(_ id: Int64, at: Int64) throws(CoreError) {
        try store.write { db in
            try db.execute(sql: "UPDATE schedule SET lastHandled = max(lastHandled, ?) WHERE id = ?", arguments: [at, id])
        }
    }

    static func entry(_ row: Row) -> ScheduleEntry? {
        guard let id = Int64.fromDatabaseValue(row["id"] ?? .null),
              let whenText = String.fromDatabaseValue(row["whenText"] ?? .null),
              let when = try? ScheduleWhen(parsing: whenText),
              let json = String.fromDatabaseValue(row["action"] ?? .null),
              let action = try? JSONDecoder().decode(ScheduleAction.self, from: Data(json.utf8)) else { return nil }
        return ScheduleEntry(id: id, name: String.fromDatabaseValue(row["name"] ?? .null), when: when, action: action,
                             enabled: (Int64.fromDatabaseValue(row["enabled"] ?? .null) ?? 1) != 0,
                             lastHandled: Int64.fromDatabaseValue(row["lastHandled"] ?? .null) ?? 0,
                             seed: UInt64(bitPattern: Int64.fromDatabaseValue(row["seed"] ?? .null) ?? 0))
    }

    // MARK: quiet days

    public func quietDays() throws(CoreError) -> Set<CivilDate> {
        Set(try store.read { db in try String.fetchAll(db, sql: "SELECT date FROM scheduleQuiet") }.compactMap(CivilDate.init))
    }

    public func skip(_ date: CivilDate) throws(CoreError) {
        let text = date.description
        try store.write { db in try db.execute(sql: "INSERT OR IGNORE INTO scheduleQuiet (date) VALUES (?)", arguments: [text]) }
    }

    public func unskip(_ date: CivilDate) throws(CoreError) {
        let text = date.description
        try store.write { db in try db.execute(sql: "DELETE FROM scheduleQuiet WHERE date = ?", arguments: [text]) }
    }

    // MARK: events

    public func record(_ e: ScheduleEvent) throws(CoreError) {
        try store.write { db in
            try db.execute(sql: "INSERT INTO scheduleEvent (entry, at, outcome, detail) VALUES (?, ?, ?, ?)",
                           arguments: [e.entry, e.at, e.outcome, e.detail])
            // Keep the last 5000.
            try db.execute(sql: "DELETE FROM scheduleEvent WHERE id <= (SELECT max(id) FROM scheduleEvent) - 5000")
        }
    }

    public func events(entry: Int64? = nil, limit: Int = 100) throws(CoreError) -> [ScheduleEvent] {
        try store.read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT * FROM scheduleEvent WHERE ? IS NULL OR entry = ? ORDER BY id DESC LIMIT ?",
                                        arguments: [entry, entry, limit])
            return rows.compactMap { r in
                guard let e = Int64.fromDatabaseValue(r["entry"] ?? .null), let at = Int64.fromDatabaseValue(r["at"] ?? .null),
                      let o = String.fromDatabaseValue(r["outcome"] ?? .null) else { return nil }
                return ScheduleEvent(entry: e, at: at, outcome: o, detail: String.fromDatabaseValue(r["detail"] ?? .null))
            }
        }
    }
}
