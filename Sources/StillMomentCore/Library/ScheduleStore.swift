/// The daemon's schedule, in the catalog database: entries (WHEN and ACTION), quiet days
/// and what happened to each occurrence (ran, missed, skipped, failed). It survives
/// restarts and reboots; the daemon only reads it and records what it did.
import FoundationEssentials
import GRDB

/// What a scheduled entry does.
public enum ScheduleAction: Sendable, Equatable, Codable, CustomStringConvertible {
    /// A sit: a preset, timer options, or both (options override the preset).
    case timer(preset: LibraryRef?, request: TimerRequest)
    /// A guided meditation from the library.
    case play(meditation: LibraryRef)
    /// A bell only: a sound struck `strikes` times at `volume` (no session, no log entry).
    case bell(sound: String, strikes: Int, volume: Double)

    /// The action as `schedule add` and the timetable file take it (names quoted where
    /// they need it, so that a timetable reads back exactly).
    public var description: String {
        switch self {
        case .timer(let preset, let request):
            let options = Self.optionText(request)
            return ([preset.map { "--preset \(ShellWords.quote($0.name))" }].compactMap { $0 } + [options]).filter { !$0.isEmpty }.joined(separator: " ")
        case .play(let m): return "--play \(ShellWords.quote(m.name))"
        case .bell(let sound, let strikes, let volume):
            return "--bell \(ShellWords.quote(sound))" + (strikes != 1 ? " --strikes \(strikes)" : "") + (volume != 1 ? " --volume \(volume)" : "")
        }
    }

    /// The preset and the meditation the action refers to.
    public var references: [LibraryRef] {
        switch self {
        case .timer(let preset, _): return preset.map { [$0] } ?? []
        case .play(let m): return [m]
        case .bell: return []
        }
    }

    /// A request as the options one would type (for list, export).
    public static func optionText(_ r: TimerRequest) -> String {
        var parts: [String] = []
        func add(_ o: TimerOption, _ v: String?) { if let v { parts.append("--\(o.rawValue) \(ShellWords.quote(v))") } }
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
    /// What keeps it from running (its preset or meditation was deleted); nil when it can.
    public var problem: ScheduleProblem? = nil
    /// A bell for several rooms (nil: this node only), its id on every node, and the node
    /// it came from (nil: made here; a copy is kept in step with its maker's).
    public var rooms: RoomChoice? = nil
    public var uuid: String? = nil
    public var origin: String? = nil
    /// The sync devices it runs on, by name (nil: every device that has it).
    public var devices: [String]? = nil
    /// Whether it runs on other devices only (it is listed here, and never rings here).
    public var elsewhere = false

    /// The entry as a line of the timetable file (`schedule export`, read back by `import`
    /// to the same entry). A device is not written: a timetable file never chooses one.
    public var line: String {
        var action = self.action
        if case .timer(let preset, var request) = action {
            request.device = nil
            action = .timer(preset: preset, request: request)
        }
        return "\(when) \(action)" + (rooms.map { " --rooms \($0)" } ?? "") + (name.map { " --name " + ShellWords.quote($0) } ?? "")
            + (devices.map { " --devices " + ShellWords.quote($0.joined(separator: ",")) } ?? "") + (enabled ? "" : " --disabled")
    }
}

/// An entry to add: when, what and its name, its action bound (`ScheduleStore.bind`).
public struct NewScheduleEntry: Sendable, Equatable {
    public var when: ScheduleWhen
    public var action: ScheduleAction
    public var name: String?
    public var enabled: Bool
    /// Rooms: a bell heard in each at its instant (nil: here only).
    public var rooms: RoomChoice?
    /// The sync devices it runs on, by name (nil: all).
    public var devices: [String]?

    public init(when: ScheduleWhen, action: ScheduleAction, name: String?, enabled: Bool = true, rooms: RoomChoice? = nil, devices: [String]? = nil) {
        self.when = when
        self.action = action
        self.name = name
        self.enabled = enabled
        self.rooms = rooms
        self.devices = devices
    }

    /// `--devices`: names of sync devices (`pi-hall,pi-bedroom`), or `all` (nil).
    public static func devices(parsing text: String) throws(CoreError) -> [String]? {
        let t = text.trimmingWhitespace()
        if t.lowercased() == "all" { return nil }
        var names: [String] = []
        for part in t.split(separator: ",", omittingEmptySubsequences: false) {
            names.append(try Names.check(String(part), option: "--devices", maxLength: 64))
        }
        guard !names.isEmpty, names.count <= 20 else {
            throw CoreError.badValue(option: "--devices", reason: both("1 to 20 device names, or all", "1 bis 20 Gerätenamen oder all"))
        }
        return names
    }

    /// Rooms take a bell only (a sit in several rooms is not built yet).
    public func checkRooms() throws(CoreError) {
        guard rooms != nil else { return }
        guard case .bell = action else {
            throw CoreError.badValue(option: "--rooms", reason: both("rooms take a bell only (--bell SOUND)", "Räume nehmen nur eine Glocke (--bell KLANG)"))
        }
    }

    /// A timetable file (shared, imported) never chooses the sound device: only the local
    /// user does, in their settings, presets and own commands.
    public func checkForTimetable() throws(CoreError) {
        if case .timer(_, let request) = action, request.device != nil {
            throw CoreError.badValue(option: "--device", reason: both(
                "a timetable file does not choose the sound device; name a preset that does, or add the entry with `schedule add`",
                "eine Zeitplandatei wählt kein Audiogerät; nenne eine Vorlage, die es tut, oder füge den Eintrag mit `schedule add` hinzu"))
        }
    }
}

/// What became of an entry's time (stored and shown by these names).
public enum ScheduleOutcome: String, Sendable, Equatable, Codable, CaseIterable {
    case ran, missed, skipped, failed
}

public struct ScheduleEvent: Sendable, Equatable, Codable {
    public var entry: Int64
    public var at: Int64
    public var outcome: ScheduleOutcome
    public var detail: String?

    public init(entry: Int64, at: Int64, outcome: ScheduleOutcome, detail: String?) {
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

    /// An entry's name: 1 to 80 characters (the one rule for names).
    public static func checkName(_ raw: String) throws(CoreError) -> String {
        try Names.check(raw, option: "--name", maxLength: 80)
    }

    /// The most entries a schedule holds.
    public static let maxEntries = 1000

    /// Adds an entry at `now` (unix seconds): its occurrences from this very second on are
    /// due (one in the current second rings at once, not never): `lastHandled` is `now - 1`.
    @discardableResult
    public func add(when: ScheduleWhen, action: ScheduleAction, name: String?, now: Int64) throws(CoreError) -> ScheduleEntry {
        let ids = try add([NewScheduleEntry(when: when, action: action, name: name)], replacing: false, now: now)
        guard let id = ids.first, let entry = try find(id) else { throw CoreError.io(path: store.databasePath, reason: .same("the entry was not saved")) }
        return entry
    }

    /// Adds entries, after removing every present one when `replacing` (a timetable
    /// imported with --replace), in one transaction: every limit is checked first, and a
    /// failure changes nothing. Actions must be bound (`bind`).
    @discardableResult
    public func add(_ entries: [NewScheduleEntry], replacing: Bool, now: Int64) throws(CoreError) -> [Int64] {
        var rows: [(name: String?, when: String, action: String, enabled: Bool, seed: Int64, rooms: String?, uuid: String, devices: [String]?)] = []
        for e in entries {
            guard e.action.references.allSatisfy({ $0.id != nil }) else {
                throw CoreError.badRequest(.same("the entry's preset or meditation is not bound"))
            }
            try e.checkRooms()
            rows.append((e.name, e.when.description, JSON(encoding: e.action).line, e.enabled,
                         Int64(bitPattern: UInt64.random(in: 0...UInt64.max)), e.rooms?.description,
                         UUID().uuidString.lowercased(), e.rooms == nil ? e.devices : nil))
        }
        let limit = Self.maxEntries, after = now - 1, created = Date().timeIntervalSince1970, added = rows
        return try store.write { db -> [Int64] in
            let present = replacing ? 0 : try Int.fetchOne(db, sql: "SELECT count(*) FROM schedule") ?? 0
            guard present + added.count <= limit else {
                throw CoreError.badRequest(present == 0
                    ? both("the schedule holds \(limit) entries at most (this is \(added.count))",
                         "der Zeitplan fasst höchstens \(limit) Einträge (das sind \(added.count))")
                    : both("the schedule holds \(limit) entries at most (\(present) there and \(added.count) new)",
                         "der Zeitplan fasst höchstens \(limit) Einträge (\(present) vorhanden und \(added.count) neue)"))
            }
            // A timetable replaced is this node's own: the copies of other nodes' entries stay.
            if replacing {
                // Synced entries replaced are deleted on the other devices too.
                for uuid in try String.fetchAll(db, sql: "SELECT uuid FROM schedule WHERE origin IS NULL AND rooms IS NULL AND uuid IS NOT NULL") {
                    try SyncSchedule.recordDelete(db, uuid)
                }
                try db.execute(sql: "DELETE FROM schedule WHERE origin IS NULL")
            }
            var ids: [Int64] = []
            for r in added {
                try db.execute(sql: "INSERT INTO schedule (name, whenText, action, enabled, lastHandled, seed, created, rooms, uuid, devices) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               arguments: [r.name, r.when, r.action, r.enabled, after, r.seed, created, r.rooms, r.uuid,
                                           r.devices.map { JSON(encoding: $0).line }])
                ids.append(db.lastInsertedRowID)
                if r.rooms == nil { try SyncSchedule.record(db, uuid: r.uuid, name: r.name, when: r.when, action: r.action, enabled: r.enabled, devices: r.devices) }
            }
            return ids
        }
    }

    public func all() throws(CoreError) -> [ScheduleEntry] {
        try store.read { db in try Self.resolve(try Row.fetchAll(db, sql: "SELECT * FROM schedule ORDER BY id").compactMap(Self.entry), db) }
    }

    public func find(_ id: Int64) throws(CoreError) -> ScheduleEntry? {
        try store.read { db in
            try Self.resolve(try Row.fetchAll(db, sql: "SELECT * FROM schedule WHERE id = ?", arguments: [id]).compactMap(Self.entry), db).first
        }
    }

    public func require(_ id: String) throws(CoreError) -> ScheduleEntry {
        guard let n = Int64(id.trimmingWhitespace()), let e = try find(n) else {
            throw CoreError.badValue(option: "", reason: both(
                "no entry \(Display.clean(id)) in the schedule (see `stillmoment schedule list`)",
                "kein Eintrag \(Display.clean(id)) im Zeitplan (siehe `stillmoment schedule list`)"))
        }
        return e
    }

    public func remove(_ id: Int64) throws(CoreError) {
        try store.write { db in
            if let uuid = try String.fetchOne(db, sql: "SELECT uuid FROM schedule WHERE id = ? AND origin IS NULL AND rooms IS NULL", arguments: [id]) {
                try SyncSchedule.recordDelete(db, uuid)
            }
            try db.execute(sql: "DELETE FROM schedule WHERE id = ?", arguments: [id])
        }
    }

    public func setEnabled(_ id: Int64, _ enabled: Bool, now: Int64) throws(CoreError) {
        // Enabling again starts from now: nothing missed meanwhile rings late.
        try store.write { db in
            try db.execute(sql: "UPDATE schedule SET enabled = ?, lastHandled = CASE WHEN ? THEN max(lastHandled, ?) ELSE lastHandled END WHERE id = ?",
                           arguments: [enabled, enabled, now, id])
            if let uuid = try String.fetchOne(db, sql: "SELECT uuid FROM schedule WHERE id = ? AND origin IS NULL AND rooms IS NULL", arguments: [id]) {
                try SyncSchedule.recordEnabled(db, uuid, enabled)
            }
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
              let action = try? JSON.decode(ScheduleAction.self, from: json.utf8) else { return nil }
        var e = ScheduleEntry(id: id, name: String.fromDatabaseValue(row["name"] ?? .null), when: when, action: action,
                              enabled: (Int64.fromDatabaseValue(row["enabled"] ?? .null) ?? 1) != 0,
                              lastHandled: Int64.fromDatabaseValue(row["lastHandled"] ?? .null) ?? 0,
                              seed: UInt64(bitPattern: Int64.fromDatabaseValue(row["seed"] ?? .null) ?? 0))
        if row.hasColumn("rooms") {
            e.rooms = String.fromDatabaseValue(row["rooms"] ?? .null).flatMap { try? RoomChoice(parsing: $0) }
            e.uuid = String.fromDatabaseValue(row["uuid"] ?? .null)
            e.origin = String.fromDatabaseValue(row["origin"] ?? .null)
        }
        if row.hasColumn("devices") {
            e.devices = String.fromDatabaseValue(row["devices"] ?? .null).flatMap { try? JSON.decode([String].self, from: $0.utf8) }
        }
        return e
    }

    // MARK: entries of other nodes (rooms)

    static func addRooms(_ db: Database) throws {
        try db.alter(table: "schedule") { t in
            t.add(column: "rooms", .text)
            t.add(column: "uuid", .text)
            t.add(column: "origin", .text)
        }
        try db.create(index: "scheduleUUID", on: "schedule", columns: ["uuid"], options: .unique)
    }

    /// Keeps the copy of another node's entry for rooms as it now is (added, or changed in
    /// place: its occurrences already handled stay handled). Returns whether anything changed.
    @discardableResult
    public func keepCopy(_ t: RoomTimetableEntry, now: Int64) throws(CoreError) -> Bool {
        let action = JSON(encoding: ScheduleAction.bell(sound: t.bell, strikes: t.strikes, volume: t.volume)).line
        let when = t.when.description, rooms = t.rooms.description, limit = Self.maxEntries
        let created = Date().timeIntervalSince1970
        return try store.write { db -> Bool in
            if let row = try Row.fetchOne(db, sql: "SELECT id, origin, whenText, action, enabled, rooms, name FROM schedule WHERE uuid = ?", arguments: [t.uuid]) {
                // An entry made here is never overwritten from outside.
                guard String.fromDatabaseValue(row["origin"] ?? .null) == t.from else { return false }
                let same = String.fromDatabaseValue(row["whenText"] ?? .null) == when && String.fromDatabaseValue(row["action"] ?? .null) == action
                    && (Int64.fromDatabaseValue(row["enabled"] ?? .null) ?? 1 != 0) == t.enabled
                    && String.fromDatabaseValue(row["rooms"] ?? .null) == rooms && String.fromDatabaseValue(row["name"] ?? .null) == t.name
                if same { return false }
                try db.execute(sql: "UPDATE schedule SET whenText = ?, action = ?, enabled = ?, rooms = ?, name = ? WHERE uuid = ?",
                               arguments: [when, action, t.enabled, rooms, t.name, t.uuid])
                return true
            }
            let present = try Int.fetchOne(db, sql: "SELECT count(*) FROM schedule") ?? 0
            guard present < limit else {
                throw CoreError.badRequest(both("the schedule holds \(limit) entries at most", "der Zeitplan fasst höchstens \(limit) Einträge"))
            }
            try db.execute(sql: "INSERT INTO schedule (name, whenText, action, enabled, lastHandled, seed, created, rooms, uuid, origin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           arguments: [t.name, when, action, t.enabled, now - 1, Int64(bitPattern: UInt64.random(in: 0...UInt64.max)),
                                       created, rooms, t.uuid, t.from])
            return true
        }
    }

    /// Removes the copy of another node's entry (its maker removed it); an entry made here
    /// is never removed so. Returns whether there was one.
    @discardableResult
    public func dropCopy(uuid: String) throws(CoreError) -> Bool {
        try store.write { db -> Bool in
            try db.execute(sql: "DELETE FROM schedule WHERE uuid = ? AND origin IS NOT NULL", arguments: [uuid])
            return db.changesCount > 0
        }
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
                           arguments: [e.entry, e.at, e.outcome.rawValue, e.detail])
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
                      let o = String.fromDatabaseValue(r["outcome"] ?? .null).flatMap(ScheduleOutcome.init(rawValue:)) else { return nil }
                return ScheduleEvent(entry: e, at: at, outcome: o, detail: String.fromDatabaseValue(r["detail"] ?? .null))
            }
        }
    }
}
