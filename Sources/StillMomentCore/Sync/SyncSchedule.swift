/// Schedule entries in the sync journal: every entry made here for this node (not a bell for
/// rooms, which the rooms keep in step themselves) is a record under its UUID with three
/// fields: the entry (when, action, name), whether it is on, and the devices it runs on (by
/// their sync names; null: all). Every device holds every entry and lists it; one for other
/// devices only never rings here. Applied from the journal: a new entry rings from the moment
/// it arrived (nothing earlier rings late), a changed one keeps what it already handled.
/// Quiet days and the schedule's on/off switch stay on each device.
import FoundationEssentials
import Glibc
import GRDB

enum SyncSchedule {
    struct Entry: Codable, Equatable {
        var when: String
        var action: String
        var name: String?
    }

    // MARK: writing (in the schedule's own transactions)

    /// Records an entry (a timer's sound device left out: only each device's user chooses
    /// one, and the entry keeps its own here).
    static func record(_ db: Database, uuid: String, name: String?, when: String, action: String, enabled: Bool, devices: [String]?) throws {
        try SyncJournal.record(db, .schedule, id: uuid, fields: [
            ("entry", JSON(encoding: Entry(when: when, action: withoutDevice(action), name: name)).line),
            ("enabled", enabled ? "true" : "false"),
            ("devices", devices.map { JSON(encoding: $0).line } ?? "null"),
        ])
    }

    /// An action's JSON without a timer's sound device.
    static func withoutDevice(_ action: String) -> String {
        guard case .timer(let preset, var request)? = try? JSON.decode(ScheduleAction.self, from: action.utf8), request.device != nil else { return action }
        request.device = nil
        return JSON(encoding: ScheduleAction.timer(preset: preset, request: request)).line
    }

    /// A peer's action with this entry's own sound device kept (a peer never sends one).
    static func keepingDevice(_ action: String, from local: String?) -> String {
        guard let local, case .timer(_, let mine)? = try? JSON.decode(ScheduleAction.self, from: local.utf8), let device = mine.device,
              case .timer(let preset, var request)? = try? JSON.decode(ScheduleAction.self, from: action.utf8) else { return action }
        request.device = device
        return JSON(encoding: ScheduleAction.timer(preset: preset, request: request)).line
    }

    static func recordEnabled(_ db: Database, _ uuid: String, _ enabled: Bool) throws {
        try SyncJournal.record(db, .schedule, id: uuid, fields: [("enabled", enabled ? "true" : "false")])
    }

    static func recordDelete(_ db: Database, _ uuid: String) throws {
        try SyncJournal.recordDelete(db, .schedule, id: uuid)
    }

    /// The catalog's migration: the devices column, a UUID for every entry, and every entry
    /// made here for this node recorded.
    static func migrate(_ db: Database) throws {
        try db.alter(table: "schedule") { t in t.add(column: "devices", .text) }
        // A change of the devices an entry runs on is a change of the schedule; and the
        // trigger a rebuilt meditation table lost (v17 before it recreated it) is there again.
        try db.execute(sql: """
            DROP TRIGGER IF EXISTS scheduleChanged;
            CREATE TRIGGER scheduleChanged AFTER UPDATE OF name, whenText, action, enabled, devices ON schedule BEGIN UPDATE scheduleVersion SET n = n + 1; END;
            CREATE TRIGGER IF NOT EXISTS meditationRemoved AFTER DELETE ON meditation BEGIN UPDATE scheduleVersion SET n = n + 1; END;
            """)
        for id in try Int64.fetchAll(db, sql: "SELECT id FROM schedule WHERE uuid IS NULL") {
            try db.execute(sql: "UPDATE schedule SET uuid = ? WHERE id = ?", arguments: [UUID().uuidString.lowercased(), id])
        }
        for row in try Row.fetchAll(db, sql: "SELECT * FROM schedule WHERE origin IS NULL AND rooms IS NULL") {
            guard let uuid: String = row["uuid"], let when: String = row["whenText"], let action: String = row["action"] else { continue }
            try record(db, uuid: uuid, name: row["name"], when: when, action: action,
                       enabled: (row["enabled"] as Int64? ?? 1) != 0, devices: nil)
        }
    }

    // MARK: reading a peer's values

    static func check(_ c: SyncChange) throws(SyncError) {
        func refuse(_ en: String, _ de: String) -> SyncError {
            .refused(both("schedule entry \(c.id) \(c.field): \(en)", "Zeitplaneintrag \(c.id) \(c.field): \(de)"))
        }
        switch c.field {
        case "entry":
            guard let e = try? JSON.decode(Entry.self, from: c.value.utf8, strict: true), e.when.utf8.count <= 500 else {
                throw refuse("not what an entry is", "keine Angabe eines Eintrags")
            }
            do { _ = try ScheduleWhen(parsing: e.when) } catch { throw .refused(error.words) }
            guard let action = try? JSON.decode(ScheduleAction.self, from: e.action.utf8, strict: true) else {
                throw refuse("not an action of ours", "keine Aktion von uns")
            }
            switch action {
            case .timer(let preset, let request):
                // A sound device is only the local user's choice; a reference is by record id.
                guard request.device == nil else { throw refuse("names a sound device", "nennt ein Tonausgabegerät") }
                do { _ = try TimerRequest(text: request.text) } catch { throw .refused(error.words) }
                if let preset, !(preset.id.map { StoredName.isUUID(Substring($0)) } ?? false) { throw refuse("a preset without its id", "eine Vorlage ohne Kennung") }
            case .play(let m):
                guard m.id.map({ StoredName.isUUID(Substring($0)) }) ?? false else { throw refuse("a meditation without its id", "eine Meditation ohne Kennung") }
            case .bell(let sound, let strikes, let volume):
                guard !sound.isEmpty, sound.utf8.count <= 100, Importer.slug(sound) == sound, (1...20).contains(strikes),
                      volume.isFinite, (0...1).contains(volume) else { throw refuse("not a bell of ours", "keine Glocke von uns") }
            }
            for ref in action.references {
                do { _ = try Names.check(ref.name, option: "name", maxLength: 200) } catch { throw .refused(error.words) }
            }
            if let name = e.name { do { _ = try ScheduleStore.checkName(name) } catch { throw .refused(error.words) } }
        case "enabled":
            guard c.value == "true" || c.value == "false" else { throw refuse("not true or false", "nicht true oder false") }
        case "devices":
            if c.value == "null" { return }
            guard let names = try? JSON.decode([String].self, from: c.value.utf8, strict: true), (1...20).contains(names.count) else {
                throw refuse("not a list of devices", "keine Liste von Geräten")
            }
            for n in names { do { _ = try Names.check(n, option: "devices", maxLength: 64) } catch { throw .refused(error.words) } }
        default:
            throw refuse("is not a field of ours", "ist kein Feld von uns")
        }
    }

    // MARK: applying

    static func apply(_ db: Database, ids: Set<String>) throws {
        let records = try SyncJournal.records(db, .schedule, ids: ids)
        let now = Int64(Date().timeIntervalSince1970)
        for uuid in ids {
            guard let fields = records[uuid] else { continue }
            let here = try Row.fetchOne(db, sql: "SELECT id, enabled, origin, rooms, action FROM schedule WHERE uuid = ?", arguments: [uuid])
            // Never an entry of the rooms' (theirs to keep in step) under a synced id.
            if let here, (here["origin"] as String?) != nil || (here["rooms"] as String?) != nil { continue }
            guard !SyncJournal.isDeleted(fields), let value = fields["entry"]?.value,
                  let e = try? JSON.decode(Entry.self, from: value.utf8) else {
                if SyncJournal.isDeleted(fields) { try db.execute(sql: "DELETE FROM schedule WHERE uuid = ? AND origin IS NULL AND rooms IS NULL", arguments: [uuid]) }
                continue
            }
            let enabled = fields["enabled"]?.value != "false"
            let devices = fields["devices"].flatMap { $0.value == "null" ? nil : $0.value }
            if let here, let id: Int64 = here["id"] {
                // Switched on again: from now on (as `schedule enable` does).
                let wasOn = (here["enabled"] as Int64? ?? 1) != 0
                try db.execute(sql: """
                    UPDATE schedule SET whenText = ?, action = ?, name = ?, enabled = ?, devices = ?,
                        lastHandled = CASE WHEN ? THEN max(lastHandled, ?) ELSE lastHandled END WHERE id = ?
                    """, arguments: [e.when, keepingDevice(e.action, from: here["action"]), e.name, enabled, devices, enabled && !wasOn, now, id])
            } else {
                let present = try Int.fetchOne(db, sql: "SELECT count(*) FROM schedule") ?? 0
                guard present < ScheduleStore.maxEntries else { continue }
                try db.execute(sql: """
                    INSERT INTO schedule (name, whenText, action, enabled, lastHandled, seed, created, uuid, devices)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, arguments: [e.name, e.when, e.action, enabled, now - 1, Int64(bitPattern: UInt64.random(in: 0...UInt64.max)),
                                     Date().timeIntervalSince1970, uuid, devices])
            }
        }
    }
}
