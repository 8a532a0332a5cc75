// The hooks in the catalog (table `hook`: when, and the argv as a JSON array of strings):
// added, listed and removed by `stillmoment hooks`, read by the daemon's HookRunner.
import GRDB
import StillMomentCore

public struct HookStore: Sendable {
    let store: LibraryStore

    public init(store: LibraryStore) { self.store = store }

    static func createTable(_ db: Database) throws {
        try db.create(table: "hook") { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("event", .text).notNull()
            t.column("argv", .text).notNull()
        }
    }

    /// Adds a hook (checked by `Hook.check`) and returns it with its id.
    @discardableResult
    public func add(_ when: Hook.When, argv: [String]) throws(CoreError) -> Hook {
        let argv = try Hook.check(argv)
        let text = String(decoding: JSONWriter.bytes(.array(argv.map { .string($0) })), as: UTF8.self)
        let id = try store.write { db -> Int64 in
            try db.execute(sql: "INSERT INTO hook (event, argv) VALUES (?, ?)", arguments: [when.rawValue, text])
            return db.lastInsertedRowID
        }
        return Hook(id: id, when: when, argv: argv)
    }

    /// Every hook, in the order they were added (a row that no longer reads is left out).
    public func all() throws(CoreError) -> [Hook] {
        let rows = try store.read { db in
            try Row.fetchAll(db, sql: "SELECT id, event, argv FROM hook ORDER BY id").map { row -> (Int64, String, String) in
                (row["id"], row["event"], row["argv"])
            }
        }
        return rows.compactMap { id, event, text in
            guard let when = Hook.When(rawValue: event),
                  case .array(let words)? = try? JSONParser.parse(Array(text.utf8)) else { return nil }
            let argv = words.compactMap { word -> String? in
                if case .string(let s) = word { return s }
                return nil
            }
            guard argv.count == words.count, (try? Hook.check(argv)) != nil else { return nil }
            return Hook(id: id, when: when, argv: argv)
        }
    }

    /// Removes a hook by its id; false when there is none.
    public func remove(id: Int64) throws(CoreError) -> Bool {
        try store.write { db in
            try db.execute(sql: "DELETE FROM hook WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }
}
