/// The sync journal, in the catalog database: every synced field of every record with the
/// stamp of its last change and a sequence number this node gives each write. A device
/// uploads its `pending` fields and reads the hub's by the hub's sequence (a cursor the hub
/// hands out, never a clock: a change the hub commits during a cycle gets a larger number
/// than any the device has read, whatever the clocks say). The services write here in the
/// same transaction as their own tables; changes from a peer are merged here and applied to
/// those tables by `SyncRecords`, also in one transaction, so a cycle cut anywhere leaves
/// nothing half-done.
import FoundationEssentials
import Glibc
import GRDB

public enum SyncJournal {
    /// The catalog's migration: the tables, this node's id, and every preset and ended
    /// practice entry there is already, stamped now.
    static func createTables(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE syncField (
                kind TEXT NOT NULL, id TEXT NOT NULL, field TEXT NOT NULL,
                value TEXT NOT NULL, stamp TEXT NOT NULL, seq INTEGER NOT NULL,
                pending INTEGER NOT NULL DEFAULT 1,
                PRIMARY KEY (kind, id, field)) WITHOUT ROWID;
            CREATE INDEX syncFieldSeq ON syncField (seq);
            CREATE INDEX syncFieldPending ON syncField (pending) WHERE pending = 1;
            CREATE TABLE syncState (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
            """)
        try setState(db, "node", UUID().uuidString.lowercased())
        for row in try Row.fetchAll(db, sql: "SELECT * FROM preset") {
            if let preset = PresetStore.preset(row) { try SyncRecords.recordPreset(db, preset) }
        }
        let rows = try Row.fetchCursor(db, sql: "SELECT * FROM practice WHERE endReason IS NOT NULL")
        while let row = try rows.next() {
            if let entry = PracticeLog.entry(row) { try SyncRecords.recordPractice(db, entry) }
        }
    }

    /// A hub's record of what each paired device has read (the cursor it last asked from:
    /// everything up to it is merged there), so that a delete is collected only once every
    /// device has it.
    static func createPeers(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE syncPeer (device INTEGER PRIMARY KEY NOT NULL, cursor INTEGER NOT NULL, seen REAL NOT NULL);
            """)
    }

    /// This node's wall clock in milliseconds (CLOCK_REALTIME).
    public static func wallMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    // MARK: state

    static func state(_ db: Database, _ key: String) throws -> String? {
        try String.fetchOne(try db.cachedStatement(sql: "SELECT value FROM syncState WHERE key = ?"), arguments: [key])
    }

    static func setState(_ db: Database, _ key: String, _ value: String?) throws {
        if let value {
            try db.cachedStatement(sql: "INSERT INTO syncState (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
                .execute(arguments: [key, value])
        } else {
            try db.execute(sql: "DELETE FROM syncState WHERE key = ?", arguments: [key])
        }
    }

    /// This node's id.
    static func node(_ db: Database) throws -> String {
        if let node = try state(db, "node"), HybridTimestamp.isNodeID(node) { return node }
        let node = UUID().uuidString.lowercased()
        try setState(db, "node", node)
        return node
    }

    /// This node's name among its sync devices (the name it paired with; else the host's).
    static func deviceName(_ db: Database) throws -> String {
        if let name = try state(db, "name") { return name }
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "device" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func clock(_ db: Database) throws -> HybridClock {
        HybridClock(node: try node(db), last: try state(db, "clock").flatMap(HybridTimestamp.init(text:)))
    }

    /// The last sequence number given (each write gives the next, under the write lock).
    static func lastSeq(_ db: Database) throws -> Int64 {
        try state(db, "seq").flatMap { Int64($0) } ?? 0
    }

    // MARK: writing

    /// Records a change made on this node: each field gets a new stamp and waits to be
    /// uploaded. Call inside the transaction that changes the record's own table.
    static func record(_ db: Database, _ kind: SyncKind, id: String, fields: [(String, String)]) throws {
        var clock = try clock(db)
        var seq = try lastSeq(db)
        let wall = wallMilliseconds()
        var fields = fields
        // A change of a record that has a delete (one this device made or heard, and lost
        // to this change): every field is stamped again, so the record comes back whole
        // where its fields were collected after the delete (a hub keeps only the delete).
        let deleted = try Row.fetchOne(try db.cachedStatement(sql: "SELECT 1 FROM syncField WHERE kind = ? AND id = ? AND field = 'deleted'"),
                                       arguments: [kind.rawValue, id]) != nil
        if deleted && !fields.contains(where: { $0.0 == SyncChange.deletedField }) {
            let named = Set(fields.map(\.0))
            for row in try Row.fetchAll(db, sql: "SELECT field, value FROM syncField WHERE kind = ? AND id = ? AND field <> 'deleted'",
                                        arguments: [kind.rawValue, id]) {
                if let field: String = row["field"], let value: String = row["value"], !named.contains(field) { fields.append((field, value)) }
            }
        }
        for (field, value) in fields {
            let stamp = clock.tick(wall: wall)
            seq += 1
            try upsert(db, SyncChange(kind: kind, id: id, field: field, value: value, stamp: stamp), seq: seq, pending: true)
        }
        try setState(db, "seq", String(seq))
        try setState(db, "clock", clock.last.description)
    }

    static func recordDelete(_ db: Database, _ kind: SyncKind, id: String) throws {
        try record(db, kind, id: id, fields: [(SyncChange.deletedField, "true")])
    }

    private static func upsert(_ db: Database, _ c: SyncChange, seq: Int64, pending: Bool) throws {
        let statement = try db.cachedStatement(sql: """
            INSERT INTO syncField (kind, id, field, value, stamp, seq, pending) VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(kind, id, field) DO UPDATE SET value = excluded.value, stamp = excluded.stamp,
                seq = excluded.seq, pending = excluded.pending
            """)
        try statement.execute(arguments: [c.kind.rawValue, c.id, c.field, c.value, c.stamp.description, seq, pending])
    }

    /// Merges a peer's changes: every one checked first (a batch with one bad change is
    /// refused whole), this node's clock moved past their stamps (one more than 5 minutes
    /// ahead refuses the batch), each field replaced when the change's stamp is newer, and
    /// the records that changed applied to their tables. Returns how many fields changed.
    static func merge(_ db: Database, _ changes: [SyncChange], wall: Int64, folders: SyncFolders) throws -> Int {
        // Only changes newer than what is here are read further (a device reads its own
        // changes back from the hub: those cost a lookup each). What is refused refuses the
        // batch; what is older is dropped unread and changes nothing.
        let current = try db.cachedStatement(sql: "SELECT stamp, value FROM syncField WHERE kind = ? AND id = ? AND field = ?")
        // Newer: a larger stamp; under one stamp (only a peer that forged another's can make
        // two values so) the larger value by its bytes, so that every replica keeps the same
        // one. Nothing else decides: a change older than the record's delete is stored too
        // (dead, and collected with the record), since skipping it on a replica that heard
        // the delete first would leave the replicas' journals different, and a record
        // brought back later would differ by it (the property test found that).
        func isNewer(_ c: SyncChange) throws -> Bool {
            let s = c.stamp.description
            guard let row = try Row.fetchOne(current, arguments: [c.kind.rawValue, c.id, c.field]),
                  let stamp: String = row["stamp"], let value: String = row["value"] else { return true }
            return s > stamp || (s == stamp && value.utf8.lexicographicallyPrecedes(c.value.utf8))
        }
        var newer: [SyncChange] = []
        var read: [String: PracticeEntry] = [:]
        for c in changes {
            try c.check()
            guard try isNewer(c) else { continue }
            if let entry = try SyncRecords.check(c) { read[c.id + c.stamp.description] = entry }
            newer.append(c)
        }
        var clock = try clock(db)
        for c in changes { try clock.receive(c.stamp, wall: wall) }
        try setState(db, "clock", clock.last.description)
        var touched: [SyncKind: Set<String>] = [:]
        var changed = 0
        var seq = try lastSeq(db)
        for c in newer {
            // Twice in one batch: the newer of the two stays.
            guard try isNewer(c) else { continue }
            seq += 1
            try upsert(db, c, seq: seq, pending: false)
            touched[c.kind, default: []].insert(c.id)
            changed += 1
        }
        try setState(db, "seq", String(seq))
        // A delete heard: what was changed here before it lost, and is not sent any more (a
        // hub may have collected the delete once every device has it; an older change sent
        // after that would bring the record back).
        let lost = try db.cachedStatement(sql: "UPDATE syncField SET pending = 0 WHERE kind = ? AND id = ? AND stamp < ? AND pending = 1")
        for c in newer where c.field == SyncChange.deletedField {
            try lost.execute(arguments: [c.kind.rawValue, c.id, c.stamp.description])
            // A delete this record survives (changed here after it, unheard): every field is
            // stamped again, so the record goes out whole (a hub may keep only the delete).
            if let fields = try records(db, c.kind, ids: [c.id])[c.id], !isDeleted(fields) {
                try record(db, c.kind, id: c.id, fields: fields.values.filter { $0.field != SyncChange.deletedField }.map { ($0.field, $0.value) })
            }
        }
        for (kind, ids) in touched { try SyncRecords.apply(db, kind, ids: ids, read: read, folders: folders) }
        return changed
    }

    // MARK: a hub's deletes

    /// A paired device has read up to `cursor` (a device that pairs is noted at 0).
    static func noteRead(_ db: Database, device: Int64, cursor: Int64, now: Double) throws {
        try db.execute(sql: """
            INSERT INTO syncPeer (device, cursor, seen) VALUES (?, ?, ?)
            ON CONFLICT(device) DO UPDATE SET cursor = max(cursor, excluded.cursor), seen = excluded.seen
            """, arguments: [device, max(0, cursor), now])
    }

    /// Collects the deletes every device of `paired` has read (a device that paired for
    /// sync and never read holds them all back; a revoked one, not in `paired`, none): of
    /// each such record, still deleted, every field but the delete leaves the journal. The
    /// delete's own row (about 100 bytes) stays: a device that comes back after a long time
    /// (revoked and paired again, restored from a backup) still hears of it, and a change
    /// older than it that arrives late stays dead. Returns how many records were emptied.
    static func collect(_ db: Database, paired: Set<Int64>) throws -> Int {
        var cursors: [Int64] = []
        for row in try Row.fetchAll(db, sql: "SELECT device, cursor FROM syncPeer") {
            guard let device: Int64 = row["device"], paired.contains(device), let cursor: Int64 = row["cursor"] else { continue }
            cursors.append(cursor)
        }
        let done = try state(db, "collectedThrough").flatMap { Int64($0) } ?? 0
        guard let everyone = cursors.min(), everyone > done else { return 0 }
        var collected = 0
        // Every record with a field written since the last collection (its delete, or a dead
        // change of it that came late) whose delete everyone has read.
        let rows = try Row.fetchAll(db, sql: """
            SELECT DISTINCT f.kind, f.id FROM syncField f
            WHERE f.seq > ? AND f.seq <= ?
              AND EXISTS (SELECT 1 FROM syncField d WHERE d.kind = f.kind AND d.id = f.id AND d.field = 'deleted' AND d.seq <= ?)
            """, arguments: [done, everyone, everyone])
        for row in rows {
            guard let kindText: String = row["kind"], let kind = SyncKind(rawValue: kindText), let id: String = row["id"],
                  let fields = try records(db, kind, ids: [id])[id], isDeleted(fields), fields.count > 1 else { continue }
            try db.execute(sql: "DELETE FROM syncField WHERE kind = ? AND id = ? AND field <> 'deleted'", arguments: [kind.rawValue, id])
            collected += 1
        }
        try setState(db, "collectedThrough", String(everyone))
        return collected
    }

    // MARK: reading

    /// The values one page or one upload carries at most (bytes before escaping).
    public static let pageBytes = 1 << 20

    /// The fields written after `seq`, in order (at most `limit`), and the last one's seq.
    static func changes(_ db: Database, after seq: Int64, limit: Int) throws -> (changes: [SyncChange], last: Int64) {
        let rows = try Row.fetchAll(db, sql: "SELECT * FROM syncField WHERE seq > ? ORDER BY seq LIMIT ?", arguments: [seq, limit])
        var last = seq
        var list: [SyncChange] = []
        var bytes = 0
        for row in rows {
            // A page holds at most `pageBytes` of values (their JSON, escaped twice over,
            // stays well under what a device reads in one answer).
            let size = (row["value"] as String?)?.utf8.count ?? 0
            if !list.isEmpty && bytes + size > pageBytes { break }
            bytes += size
            last = row["seq"] ?? last
            if let c = change(row) { list.append(c) }
        }
        return (list, last)
    }

    /// The fields changed here and not yet taken by the hub (at most `limit`).
    static func pending(_ db: Database, limit: Int) throws -> [SyncChange] {
        try Row.fetchAll(db, sql: "SELECT * FROM syncField WHERE pending = 1 ORDER BY seq LIMIT ?", arguments: [limit]).compactMap(change)
    }

    /// The hub took these: they stop waiting, unless changed again meanwhile.
    static func acknowledge(_ db: Database, _ changes: [SyncChange]) throws {
        let update = try db.cachedStatement(sql: "UPDATE syncField SET pending = 0 WHERE kind = ? AND id = ? AND field = ? AND stamp = ?")
        for c in changes {
            try update.execute(arguments: [c.kind.rawValue, c.id, c.field, c.stamp.description])
        }
    }

    /// Every field of the records of `kind` (`ids`: only these), grouped by record.
    static func records(_ db: Database, _ kind: SyncKind, ids: Set<String>? = nil) throws -> [String: [String: SyncChange]] {
        var out: [String: [String: SyncChange]] = [:]
        if let ids {
            let statement = try db.cachedStatement(sql: "SELECT * FROM syncField WHERE kind = ? AND id = ?")
            for id in ids {
                for row in try Row.fetchAll(statement, arguments: [kind.rawValue, id]) {
                    if let c = change(row) { out[c.id, default: [:]][c.field] = c }
                }
            }
        } else {
            for row in try Row.fetchAll(db, sql: "SELECT * FROM syncField WHERE kind = ?", arguments: [kind.rawValue]) {
                if let c = change(row) { out[c.id, default: [:]][c.field] = c }
            }
        }
        return out
    }

    static func change(_ row: Row) -> SyncChange? {
        guard let kindText: String = row["kind"], let kind = SyncKind(rawValue: kindText), let id: String = row["id"],
              let field: String = row["field"], let value: String = row["value"], let stampText: String = row["stamp"],
              let stamp = HybridTimestamp(text: stampText) else { return nil }
        return SyncChange(kind: kind, id: id, field: field, value: value, stamp: stamp)
    }

    /// Whether a record is deleted: its delete is newer than every other field's change.
    static func isDeleted(_ fields: [String: SyncChange]) -> Bool {
        guard let deleted = fields[SyncChange.deletedField] else { return false }
        return fields.values.allSatisfy { $0.field == SyncChange.deletedField || $0.stamp < deleted.stamp }
    }
}
