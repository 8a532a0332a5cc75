/// The private practice log, in the catalog database: one row per session that was
/// heard, written by the session runner when it ends. A session that is still playing
/// has an open row (its heard time updated every few seconds), so a sit that dies with
/// its daemon is closed at the next start with what was heard until then. Reading goes
/// by SQL pages and SQL-kept totals (PracticeTotals), so a log of a million entries
/// answers in milliseconds in constant memory.
import FoundationEssentials
import Glibc
import GRDB

public struct PracticeLog: Sendable {
    public let store: LibraryStore

    public init(store: LibraryStore) { self.store = store }

    static func createTables(_ db: Database) throws {
        try db.create(table: "practice") { t in
            t.primaryKey("id", .text)
            t.column("kind", .text).notNull()
            t.column("name", .text).notNull()
            t.column("meditationID", .text)
            t.column("teacher", .text)
            t.column("preset", .text)
            t.column("startUnix", .integer).notNull()
            t.column("utcOffset", .integer).notNull()
            t.column("planned", .integer).notNull()
            t.column("heard", .integer).notNull()
            t.column("sections", .text)
            t.column("endReason", .text)              // NULL while the session plays
            t.column("scheduled", .boolean).notNull().defaults(to: false)
        }
        try db.create(index: "practice_start", on: "practice", columns: ["startUnix"])
    }

    // MARK: writing

    /// Opens a row for a session that starts now (closed by `close`).
    public func open(_ e: PracticeEntry) throws(CoreError) {
        try store.write { db in try Self.insert(e, open: true, db) }
    }

    /// Updates what an open session has been heard so far.
    public func update(id: String, heardMilliseconds: Int64) throws(CoreError) {
        try store.write { db in
            try db.execute(sql: "UPDATE practice SET heard = ? WHERE id = ? AND endReason IS NULL",
                           arguments: [heardMilliseconds, id])
        }
    }

    /// Closes a session's row with what was heard and why it ended. A session not heard
    /// at all (nothing after its preparation) leaves no entry.
    public func close(id: String, heardMilliseconds: Int64, reason: String) throws(CoreError) {
        try store.write { db in
            if heardMilliseconds <= 0 {
                try db.execute(sql: "DELETE FROM practice WHERE id = ? AND endReason IS NULL", arguments: [id])
            } else {
                try db.execute(sql: "UPDATE practice SET heard = ?, endReason = ? WHERE id = ?",
                               arguments: [heardMilliseconds, reason, id])
                try Self.recordEnded(db, ids: [id])
            }
        }
    }

    /// Closes the rows of sessions that died with their process (at a daemon's start):
    /// what was heard until the last update, ended as `failed`. Returns how many.
    @discardableResult
    public func closeInterrupted() throws(CoreError) -> Int {
        try store.write { db in
            try db.execute(sql: "DELETE FROM practice WHERE endReason IS NULL AND heard <= 0")
            let open = try String.fetchAll(db, sql: "SELECT id FROM practice WHERE endReason IS NULL")
            try db.execute(sql: "UPDATE practice SET endReason = 'failed' WHERE endReason IS NULL")
            try Self.recordEnded(db, ids: open)
            return open.count
        }
    }

    /// Adds finished entries (an import); entries whose id is there already are skipped.
    /// Returns how many were added.
    public func add(_ entries: [PracticeEntry]) throws(CoreError) -> Int {
        try store.write { db in
            var added = 0
            for e in entries {
                let exists = try Int.fetchOne(db, sql: "SELECT count(*) FROM practice WHERE id = ?", arguments: [e.id]) ?? 0
                if exists == 0 {
                    try Self.insert(e, open: false, db)
                    try SyncRecords.recordPractice(db, e)
                    added += 1
                }
            }
            return added
        }
    }

    public func delete(id: String) throws(CoreError) -> Bool {
        try store.write { db in
            try db.execute(sql: "DELETE FROM practice WHERE id = ? AND endReason IS NOT NULL", arguments: [id])
            guard db.changesCount > 0 else { return false }
            try SyncJournal.recordDelete(db, .practice, id: id)
            return true
        }
    }

    /// Records ended entries for sync (the journal holds each sit once it has ended).
    static func recordEnded(_ db: Database, ids: [String]) throws {
        for id in ids {
            if let row = try Row.fetchOne(db, sql: "SELECT * FROM practice WHERE id = ?", arguments: [id]), let e = entry(row) {
                try SyncRecords.recordPractice(db, e)
            }
        }
    }

    static func insert(_ e: PracticeEntry, open: Bool, _ db: Database) throws {
        // Cached: an import or a sync inserts thousands (compiling each cost more than the insert).
        try db.cachedStatement(sql: """
            INSERT INTO practice (id, kind, name, meditationID, teacher, preset, startUnix, utcOffset, planned, heard,
                                  sections, endReason, scheduled)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [e.id, e.kind.rawValue, e.name, e.meditationID, e.teacher, e.preset, e.start.unix,
                             e.start.utcOffset, e.plannedMilliseconds, e.heardMilliseconds, e.sections,
                             open ? nil : e.endReason, e.scheduled])
    }

    // MARK: reading

    /// Ended entries, oldest first, within [since, until] (local days, inclusive); with a
    /// limit, the last `limit` of them. Read by pages of SQL (`forEach`), never the whole log.
    public func entries(since: CivilDate? = nil, until: CivilDate? = nil, limit: Int? = nil) throws(CoreError) -> [PracticeEntry] {
        try store.read { db in
            var list: [PracticeEntry] = []
            try Self.forEach(db, since: since, until: until, limit: limit) { list.append($0) }
            return list
        }
    }

    /// Calls `body` with each ended entry, oldest first, within [since, until]; with a
    /// limit, only the last `limit`. Rows are read one at a time (an SQLite cursor in one
    /// read transaction), so memory stays flat however long the log is.
    public func forEach(since: CivilDate? = nil, until: CivilDate? = nil, limit: Int? = nil,
                        _ body: (PracticeEntry) throws -> Void) throws(CoreError) {
        try store.readInPlace { db in try Self.forEach(db, since: since, until: until, limit: limit, body) }
    }

    static func forEach(_ db: Database, since: CivilDate?, until: CivilDate?, limit: Int?,
                        _ body: (PracticeEntry) throws -> Void) throws {
        var terms = [PracticeTotals.counts("practice")]
        var arguments: [any DatabaseValueConvertible] = []
        // The local day is within ±18 h of the UTC one: the bound on startUnix lets the
        // index narrow the range, the exact local day decides.
        if let since {
            let first = Int64(since.daysSinceEpoch)
            terms.append("startUnix >= ? AND \(PracticeTotals.localDay("practice")) >= ?")
            arguments += [first * 86_400 - 64_800, first]
        }
        if let until {
            let last = Int64(until.daysSinceEpoch)
            terms.append("startUnix < ? AND \(PracticeTotals.localDay("practice")) <= ?")
            arguments += [(last + 1) * 86_400 + 64_800, last]
        }
        var sql = "SELECT * FROM practice WHERE " + terms.joined(separator: " AND ")
        if let limit {
            sql = "SELECT * FROM (\(sql) ORDER BY startUnix DESC, id DESC LIMIT \(max(0, limit)))"
        }
        sql += " ORDER BY startUnix, id"
        let rows = try Row.fetchCursor(db, sql: sql, arguments: StatementArguments(arguments))
        while let row = try rows.next() {
            if let e = entry(row) { try body(e) }
        }
    }

    /// Time sat and sits per period, average, longest, per weekday, preset and teacher:
    /// from the totals SQLite keeps (PracticeTotals), the same numbers as
    /// `PracticeStats(entries(), today:)` in milliseconds.
    public func stats(today: CivilDate) throws(CoreError) -> PracticeStats {
        try store.read { db in try PracticeTotals.stats(db, today: today) }
    }

    /// Ended entries whose id starts with `prefix` (at most `limit`), by the primary key.
    public func entries(idPrefix prefix: String, limit: Int = 20) throws(CoreError) -> [PracticeEntry] {
        guard !prefix.isEmpty else { return [] }
        return try store.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM practice WHERE id >= ? AND id < ? AND \(PracticeTotals.counts("practice")) ORDER BY id LIMIT ?",
                             arguments: [prefix, prefix + "\u{10FFFF}", limit])
                .compactMap(Self.entry).filter { $0.id.hasPrefix(prefix) }
        }
    }

    /// Whether the log holds no ended entry at all.
    public func isEmpty() throws(CoreError) -> Bool {
        try store.read { db in try Bool.fetchOne(db, sql: "SELECT NOT EXISTS (SELECT 1 FROM practiceDay)") ?? true }
    }

    static func entry(_ row: Row) -> PracticeEntry? {
        func text(_ c: String) -> String? { String.fromDatabaseValue(row[c] ?? .null) }
        func int(_ c: String) -> Int64? { Int64.fromDatabaseValue(row[c] ?? .null) }
        guard let id = text("id"), let kind = text("kind").flatMap(SessionKind.init(rawValue:)), let name = text("name"),
              let start = int("startUnix"), let offset = int("utcOffset"), abs(offset) <= 18 * 3600,
              let planned = int("planned"), let heard = int("heard"), let reason = text("endReason")
        else { return nil }
        return PracticeEntry(id: id, kind: kind, name: name, meditationID: text("meditationID"), teacher: text("teacher"),
                             preset: text("preset"), start: LocalTime(unix: start, utcOffset: Int(offset)),
                             plannedMilliseconds: planned, heardMilliseconds: heard, sections: text("sections"),
                             endReason: reason, scheduled: (int("scheduled") ?? 0) != 0)
    }
}
