// The schedule's main switch: off, nothing rings (every entry keeps its own on/off and the
// quiet days); on again, the timetable starts from that moment (nothing that passed while
// it was off rings late or is counted as missed). One row in `scheduleSwitch` while off;
// switching bumps the timetable's counter, so a daemon notices whoever switched it.
import GRDB

extension ScheduleStore {
    static func createSwitch(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE scheduleSwitch (id INTEGER PRIMARY KEY CHECK (id = 1), offSince INTEGER NOT NULL);
            CREATE TRIGGER switchedOff AFTER INSERT ON scheduleSwitch BEGIN UPDATE scheduleVersion SET n = n + 1; END;
            CREATE TRIGGER switchedOn AFTER DELETE ON scheduleSwitch BEGIN UPDATE scheduleVersion SET n = n + 1; END;
            """)
    }

    /// Since when the schedule is off (unix seconds), nil while it is on.
    public func offSince() throws(CoreError) -> Int64? {
        try store.read { db in try Int64.fetchOne(db, sql: "SELECT offSince FROM scheduleSwitch WHERE id = 1") }
    }

    /// Switches the schedule off (kept as it is when already off) or on: on again, every
    /// entry's last handled time becomes now, in the same transaction.
    public func setOn(_ on: Bool, now: Int64) throws(CoreError) {
        try store.write { db in
            if on {
                guard try Int64.fetchOne(db, sql: "SELECT offSince FROM scheduleSwitch WHERE id = 1") != nil else { return }
                try db.execute(sql: "DELETE FROM scheduleSwitch")
                try db.execute(sql: "UPDATE schedule SET lastHandled = max(lastHandled, ?)", arguments: [now])
            } else {
                try db.execute(sql: "INSERT OR IGNORE INTO scheduleSwitch (id, offSince) VALUES (1, ?)", arguments: [now])
            }
        }
    }
}
