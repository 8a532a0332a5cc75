/// Wrong pairing PINs, counted in the catalog database (table `webPinFailure`), so that a
/// crash or a restart of the web app forgets none. Five wrong PINs within a minute from one
/// client address lock that address until the minute since the first of them is over;
/// twenty within a minute from all addresses together lock pairing for everyone (the PIN
/// has six digits: however many addresses a guesser uses, at most 20 guesses a minute). A
/// lock refuses the right PIN too: it cannot tell who asks. One client alone (5 a minute)
/// never reaches the global budget, so it cannot lock pairing for the others.
import GRDB
import StillMomentCore

public struct PairingLockout: Sendable {
    /// Wrong PINs within `window` that lock one address.
    public static let perAddress = 5
    /// Wrong PINs within `window`, from all addresses, that lock everyone.
    public static let global = 20
    /// Seconds.
    public static let window = 60.0

    /// A lock: until when (Unix seconds), and whether it holds for every address.
    public struct Lock: Sendable, Equatable {
        public var until: Double
        public var everyone: Bool
        public init(until: Double, everyone: Bool) {
            self.until = until
            self.everyone = everyone
        }
    }

    static func createTable(_ db: Database) throws {
        try db.create(table: "webPinFailure") { t in
            t.column("address", .text).notNull()
            t.column("at", .double).notNull()
        }
        try db.create(index: "webPinFailureByAddress", on: "webPinFailure", columns: ["address", "at"])
    }

    /// The lock on `address` at `now`, if any. Failures older than the window are forgotten
    /// here (and ones more than a window ahead of the clock, should it have been set back).
    static func lock(_ db: Database, address: String, now: Double) throws -> Lock? {
        try db.execute(sql: "DELETE FROM webPinFailure WHERE at <= ? OR at > ?", arguments: [now - window, now + window])
        // The oldest of the last N failures (of this address; of all): while it is within the window, N came in a minute.
        let mine = try Double.fetchOne(db, sql: "SELECT at FROM webPinFailure WHERE address = ? ORDER BY at DESC LIMIT 1 OFFSET ?",
                                       arguments: [address, perAddress - 1])
        let all = try Double.fetchOne(db, sql: "SELECT at FROM webPinFailure ORDER BY at DESC LIMIT 1 OFFSET ?", arguments: [global - 1])
        switch (mine.map { $0 + window }, all.map { $0 + window }) {
        case (nil, nil): return nil
        case (let a?, nil): return Lock(until: a, everyone: false)
        case (nil, let g?): return Lock(until: g, everyone: true)
        case (let a?, let g?): return g >= a ? Lock(until: g, everyone: true) : Lock(until: a, everyone: false)
        }
    }

    /// Counts a wrong PIN from `address`.
    static func recordFailure(_ db: Database, address: String, now: Double) throws {
        try db.execute(sql: "INSERT INTO webPinFailure (address, at) VALUES (?, ?)", arguments: [address, now])
    }

    /// Wrong PINs `address` may still send before its lock.
    static func triesLeft(_ db: Database, address: String, now: Double) throws -> Int {
        let n = try Int.fetchOne(db, sql: "SELECT count(*) FROM webPinFailure WHERE address = ? AND at > ?",
                                 arguments: [address, now - window]) ?? 0
        return max(0, perAddress - n)
    }
}
