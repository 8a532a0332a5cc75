/// Settings marked as shared, in the sync journal: the timer's defaults a user would want the
/// same on every device (duration, preparation, gongs, strikes, intervals, sections, the
/// ambience), one record whose fields are the settings (a value, or null: the default), each
/// its own last-writer-wins register. Never shared: the sound device, the volumes (each room's
/// speaker differs), the daemon's standby, and every front-end's own (the web listener's
/// address, MQTT, the room). A change is recorded after `settings.json` is written (they are
/// two files: a change whose record a crash lost is recorded again by the next change of that
/// setting); a peer's is written to `settings.json` after its transaction commits, under the
/// file's lock, and not recorded again.
import FoundationEssentials
import Glibc
import GRDB

public enum SyncSettings {
    /// The one record of the shared settings (the same id on every device).
    static let record = "5e771195-0000-4000-8000-000000000001"

    /// The settings that travel.
    public static let shared: Set<String> = [
        "duration", "preparation", "gong", "strikes", "interval", "interval-length", "interval-mode",
        "interval-gong", "ambience", "section-gong", "section-strikes", "ambience-during",
    ]

    /// Records shared settings changed in the store at `home` (a folder without a catalog:
    /// nothing to record).
    static func record(home: String, _ changes: [(key: String, value: String?)]) {
        let changes = changes.filter { shared.contains($0.key) }
        guard !changes.isEmpty, access(home + "/library.sqlite", F_OK) == 0, let store = try? LibraryStore(home: home) else { return }
        try? store.write { db in
            try SyncJournal.record(db, .setting, id: record, fields: changes.map { ($0.key, $0.value.map { JSON.string($0).line } ?? "null") })
        }
    }

    static func check(_ c: SyncChange) throws(SyncError) {
        guard c.id == record, shared.contains(c.field), let option = TimerOption(rawValue: c.field) else {
            throw .refused(both("setting \(c.field): not one that is shared", "Einstellung \(c.field): keine geteilte"))
        }
        if c.value == "null" { return }
        guard case .string(let value)? = try? JSON.decode(JSON.self, from: c.value.utf8), value.utf8.count <= 200 else {
            throw .refused(both("setting \(c.field): not a text", "Einstellung \(c.field): kein Text"))
        }
        do { _ = try TimerValue.parse(value, as: option) } catch { throw .refused(error.words) }
    }

    /// The shared settings as the journal has them (nil inside: the default).
    static func values(_ db: Database) throws -> [String: String?] {
        guard let fields = try SyncJournal.records(db, .setting, ids: [record])[record] else { return [:] }
        var values: [String: String?] = [:]
        for (key, change) in fields where shared.contains(key) {
            if change.value == "null" {
                values[key] = .some(nil)
            } else if case .string(let v)? = try? JSON.decode(JSON.self, from: change.value.utf8) {
                values[key] = .some(v)
            }
        }
        return values
    }

    /// Writes the journal's shared settings to `settings.json` once the transaction commits,
    /// read again under the file's lock (two merges, or a merge and a local change, cannot
    /// leave the file behind the journal: a local change is recorded under the same lock).
    static func apply(_ db: Database, folders: SyncFolders) throws {
        let path = folders.settings, store = folders.store
        folders.afterCommit.add {
            try? Settings.update(path: path, droppingUnknown: true, recording: false) { settings throws(CoreError) in
                for (key, value) in try store.read({ db in try values(db) }) { settings.setShared(key, value) }
            }
        }
    }
}
