// The buttons in the catalog (table `button`: the device path, the key's code, and the
// action text of each gesture): added, listed and removed by `stillmoment button`, read by
// the daemon's ButtonWatcher. Every text is checked by its one parser before it is stored.
import GRDB
import StillMomentCore

public struct Button: Sendable, Equatable {
    public var id: Int64
    public var device: InputDevicePath
    public var key: Int
    /// Each gesture's action as typed (parsed by `ButtonAction(parsing:)`).
    public var actions: [Gesture.Kind: String]

    public init(id: Int64, device: InputDevicePath, key: Int, actions: [Gesture.Kind: String]) {
        self.id = id
        self.device = device
        self.key = key
        self.actions = actions
    }
}

public struct ButtonStore: Sendable {
    let store: LibraryStore

    public init(store: LibraryStore) { self.store = store }

    static func createTable(_ db: Database) throws {
        try db.create(table: "button") { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("device", .text).notNull()
            t.column("keyCode", .integer).notNull()
            t.column("press", .text)
            t.column("hold", .text)
            t.column("double", .text)
        }
    }

    /// Adds a button; each action is parsed first (a bad one refuses the whole button).
    @discardableResult
    public func add(device: String, key: String, actions: [Gesture.Kind: String]) throws(CoreError) -> Button {
        let path = try InputDevicePath(device)
        let code = try KeyName.code(key)
        guard !actions.isEmpty else {
            throw CoreError.badRequest(both("say what the button does: --press, --hold and/or --double ACTION",
                                            "sag, was die Taste tut: --press, --hold und/oder --double AKTION"))
        }
        for (_, text) in actions { _ = try ButtonAction(parsing: text) }
        let id = try store.write { db -> Int64 in
            try db.execute(sql: "INSERT INTO button (device, keyCode, press, hold, double) VALUES (?, ?, ?, ?, ?)",
                           arguments: [path.path, code, actions[.press], actions[.hold], actions[.double]])
            return db.lastInsertedRowID
        }
        return Button(id: id, device: path, key: code, actions: actions)
    }

    /// Every button, in the order they were added (a row that no longer reads is left out).
    public func all() throws(CoreError) -> [Button] {
        let rows = try store.read { db in
            try Row.fetchAll(db, sql: "SELECT id, device, keyCode, press, hold, double FROM button ORDER BY id").map {
                row -> (Int64, String, Int, String?, String?, String?) in
                (row["id"], row["device"], row["keyCode"], row["press"], row["hold"], row["double"])
            }
        }
        return rows.compactMap { id, device, key, press, hold, double in
            guard let path = try? InputDevicePath(device) else { return nil }
            var actions: [Gesture.Kind: String] = [:]
            actions[.press] = press
            actions[.hold] = hold
            actions[.double] = double
            return Button(id: id, device: path, key: key, actions: actions)
        }
    }

    /// Removes a button by its id; false when there is none.
    public func remove(id: Int64) throws(CoreError) -> Bool {
        try store.write { db in
            try db.execute(sql: "DELETE FROM button WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }
}
