/// How each kind of synced record is written to the journal, checked when it comes from a
/// peer, and applied to its own table. Presets: a name, the timer request (never a device:
/// only the local user chooses one, and a preset's device stays on its device), when it
/// was made. The practice log: one field per ended sit, set once (two devices' sits never
/// conflict); a deleted sit is a delete. Applying is a function of the journal alone, so
/// every device that holds the same journal holds the same presets and log.
import FoundationEssentials
import GRDB
import StillMomentAudio

public enum SyncRecords {
    // MARK: writing (in the services' transactions)

    /// Records a preset's fields: all of them for a new one (`before` nil), else those that
    /// differ from `before` (the name only when it changed, the timer only when it did).
    static func recordPreset(_ db: Database, _ p: Preset, before: Preset? = nil) throws {
        func synced(_ r: TimerRequest) -> String {
            var r = r
            r.device = nil
            return JSON(encoding: r).line
        }
        var fields: [(String, String)] = []
        if before?.id != p.id {
            fields = [("name", JSON.string(p.name).line), ("request", synced(p.request)),
                      ("created", JSON.number(p.created.timeIntervalSince1970.rounded()).line)]
        } else if let before {
            if before.name != p.name { fields.append(("name", JSON.string(p.name).line)) }
            if synced(before.request) != synced(p.request) { fields.append(("request", synced(p.request))) }
        }
        if !fields.isEmpty { try SyncJournal.record(db, .preset, id: p.id, fields: fields) }
    }

    static func recordPractice(_ db: Database, _ e: PracticeEntry) throws {
        var object = PracticeExport.json(e)
        object["sections"] = e.sections.map(JSON.string) ?? .null
        try SyncJournal.record(db, .practice, id: e.id, fields: [("entry", JSON.object(object).line)])
    }

    // MARK: reading a peer's values

    /// Reads what a change's value says by the rules of its kind (a change that breaks them
    /// is refused with the batch it came in).
    /// Returns a practice entry it read (so that applying it does not read it again).
    @discardableResult
    static func check(_ c: SyncChange) throws(SyncError) -> PracticeEntry? {
        guard c.field != SyncChange.deletedField else { return nil }
        // The kinds with a file of their own are read there.
        switch c.kind {
        case .meditation: try SyncMeditations.check(c); return nil
        case .sound: try SyncSounds.check(c); return nil
        case .schedule: try SyncSchedule.check(c); return nil
        case .setting: try SyncSettings.check(c); return nil
        case .preset, .practice: break
        }
        switch (c.kind, c.field) {
        case (.preset, "name"):
            guard case .string(let name)? = try? JSON.decode(JSON.self, from: c.value.utf8) else { throw bad(c, "not a text", "kein Text") }
            do { _ = try PresetStore.checkName(name) } catch { throw .refused(error.words) }
        case (.preset, "request"):
            let request: TimerRequest
            do { request = try JSON.decode(TimerRequest.self, from: c.value.utf8, strict: true) } catch {
                throw bad(c, "not a timer request", "keine Timer-Anfrage")
            }
            guard request.device == nil else { throw bad(c, "names a sound device (only this device's user chooses one)", "nennt ein Tonausgabegerät (das wählt nur, wer dieses Gerät benutzt)") }
            do { _ = try TimerRequest(text: request.text) } catch { throw .refused(error.words) }
        case (.preset, "created"):
            guard case .number(let t)? = try? JSON.decode(JSON.self, from: c.value.utf8), t >= 0, t <= 253_402_300_799 else {
                throw bad(c, "not a time", "keine Zeit")
            }
        case (.practice, "entry"):
            let entry = try practiceEntry(c)
            guard entry.id == c.id else { throw bad(c, "is the entry of another record", "ist der Eintrag eines anderen Satzes") }
            return entry
        default:
            throw bad(c, "is not a field of ours", "ist kein Feld von uns")
        }
        return nil
    }

    private static func bad(_ c: SyncChange, _ en: String, _ de: String) -> SyncError {
        .refused(both("\(c.kind.rawValue) \(c.id) \(c.field): \(en)", "\(c.kind.rawValue) \(c.id) \(c.field): \(de)"))
    }

    static func practiceEntry(_ c: SyncChange) throws(SyncError) -> PracticeEntry {
        guard case .object(let o)? = try? JSON.decode(JSON.self, from: c.value.utf8), o.values.allSatisfy(\.isLeaf) else {
            throw bad(c, "not a practice entry", "kein Übungseintrag")
        }
        let scheduled: String? = switch o["scheduled"] { case .bool(let b)?: b ? "true" : "false"; default: nil }
        var entry: PracticeEntry
        do throws(PracticeExport.ImportError) { entry = try PracticeExport.entry(from: { o[$0]?.text }, scheduled: scheduled, line: 1) } catch {
            throw bad(c, error.words.text(.en), error.words.text(.de))
        }
        if case .string(let sections)? = o["sections"] {
            guard sections.count <= 500, !sections.unicodeScalars.contains(where: Display.isControl) else {
                throw bad(c, "its sections are not ours", "seine Abschnitte sind nicht von uns")
            }
            entry.sections = sections
        }
        return entry
    }

    // MARK: applying

    /// Applies the records `ids` of `kind` from the journal (`read`: practice entries already
    /// read from these very changes, by record id and stamp).
    static func apply(_ db: Database, _ kind: SyncKind, ids: Set<String>, read: [String: PracticeEntry] = [:], folders: SyncFolders) throws {
        switch kind {
        case .preset: try applyPresets(db)
        case .practice: try applyPractice(db, ids: ids, read: read)
        case .meditation: try SyncMeditations.apply(db, ids: ids, folders: folders)
        case .sound: try SyncSounds.apply(db, folders: folders)
        case .schedule: try SyncSchedule.apply(db, ids: ids)
        case .setting: try SyncSettings.apply(db, folders: folders)
        }
    }

    /// The presets as the journal has them, all of them: two presets of one name (made on
    /// two devices before they met) both stay, the later-named shown with " (2)", the same
    /// on every device. A preset's device (local only) is kept. Run after every change of a
    /// preset, local or merged, so the table is always this function of the journal (a
    /// local delete can free a name another preset then shows without its " (2)").
    static func applyPresets(_ db: Database) throws {
        struct Live { var id: String; var name: String; var order: HybridTimestamp; var request: TimerRequest; var created: Double }
        let records = try SyncJournal.records(db, .preset)
        var live: [Live] = []
        for (id, fields) in records where !SyncJournal.isDeleted(fields) {
            guard let nameField = fields["name"], case .string(let name)? = try? JSON.decode(JSON.self, from: nameField.value.utf8),
                  let requestField = fields["request"],
                  let request = try? JSON.decode(TimerRequest.self, from: requestField.value.utf8) else { continue }
            let created = fields["created"].flatMap { try? JSON.decode(JSON.self, from: $0.value.utf8) }?.number ?? 0
            // Ordered by when each was made (its `created` stamp, set once), so the one made
            // first keeps the name however often either is saved.
            live.append(Live(id: id, name: name, order: fields["created"]?.stamp ?? nameField.stamp, request: request, created: created))
        }
        live.sort { ($0.order, $0.id) < ($1.order, $1.id) }
        var devices: [String: DeviceName] = [:]
        var updated: [String: Double] = [:]
        var taken = Set<String>()
        for row in try Row.fetchAll(db, sql: "SELECT id, name, request, updated FROM preset") {
            guard let id: String = row["id"] else { continue }
            if let json: String = row["request"], let r = try? JSON.decode(TimerRequest.self, from: json.utf8), let d = r.device { devices[id] = d }
            updated[id] = row["updated"]
            // A row the journal does not hold is left as it is (nothing is deleted by inference).
            if records[id] == nil, let name: String = row["name"] { taken.insert(name.lowercased()) }
        }
        let delete = try db.cachedStatement(sql: "DELETE FROM preset WHERE id = ?")
        for id in updated.keys where records[id] != nil { try delete.execute(arguments: [id]) }
        let insert = try db.cachedStatement(sql: "INSERT INTO preset (id, name, request, created, updated) VALUES (?, ?, ?, ?, ?)")
        for var p in live {
            var name = p.name
            var n = 2
            while taken.contains(name.lowercased()) {
                let suffix = " (\(n))"
                name = String(p.name.prefix(PresetStore.maximumNameLength - suffix.count)) + suffix
                n += 1
            }
            taken.insert(name.lowercased())
            p.request.device = devices[p.id]
            try insert.execute(arguments: [p.id, name, JSON(encoding: p.request).line, p.created,
                                           updated[p.id] ?? Double(p.order.milliseconds) / 1000])
        }
    }

    /// Each sit as the journal has it: there, or deleted.
    static func applyPractice(_ db: Database, ids: Set<String>, read: [String: PracticeEntry] = [:]) throws {
        let records = try SyncJournal.records(db, .practice, ids: ids)
        let deleteEnded = try db.cachedStatement(sql: "DELETE FROM practice WHERE id = ? AND endReason IS NOT NULL")
        let delete = try db.cachedStatement(sql: "DELETE FROM practice WHERE id = ?")
        for id in ids {
            guard let fields = records[id] else { continue }
            if SyncJournal.isDeleted(fields) {
                try deleteEnded.execute(arguments: [id])
                continue
            }
            // An entry that cannot be read (checked when it came, so not ours) leaves the row as it is.
            guard let field = fields["entry"], let entry = read[field.id + field.stamp.description] ?? (try? practiceEntry(field)) else { continue }
            try delete.execute(arguments: [id])
            try PracticeLog.insert(entry, open: false, db)
        }
    }
}
