/// The web app's pairing, in the catalog database: the PIN `stillmoment web pair` shows
/// (one at a time, valid for five minutes, used once) and the devices paired with it.
/// Only digests are stored: a copy of the catalog neither pairs nor signs in.
import FoundationEssentials
import GRDB
import StillMomentCore

public struct WebDevice: Sendable, Equatable, Codable {
    public var id: Int64
    public var name: String
    public var created: Double
    public var lastSeen: Double
    /// What its token opens: the web app (a browser) or sync (another node), never both.
    public var scope: PairingScope = .web
}

/// What a paired device's token opens.
public enum PairingScope: String, Sendable, Codable {
    case web
    case sync
}

public struct PairingStore: Sendable {
    public let store: LibraryStore
    /// How long a PIN is valid (seconds).
    public static let pinLifetime = 300.0
    public init(store: LibraryStore) { self.store = store }

    /// What each token opens (migration v20-web-scope): a device paired before is a sync
    /// device when it paired for sync (the hub noted it then), else a browser.
    static func addScope(_ db: Database) throws {
        try db.alter(table: "webDevice") { t in t.add(column: "scope", .text).notNull().defaults(to: "web") }
        try db.execute(sql: "UPDATE webDevice SET scope = 'sync' WHERE id IN (SELECT device FROM syncPeer)")
    }

    static func createTables(_ db: Database) throws {
        try db.create(table: "webPin") { t in
            t.primaryKey("digest", .text)
            t.column("expires", .double).notNull()
        }
        try db.create(table: "webDevice") { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("name", .text).notNull()
            t.column("tokenDigest", .text).notNull().unique()
            t.column("created", .double).notNull()
            t.column("lastSeen", .double).notNull()
        }
    }

    /// A new six-digit PIN; any earlier one stops working.
    public func newPIN(now: Double) throws(CoreError) -> (pin: String, expires: Double) {
        var rng = SystemRandomNumberGenerator()
        let number = String(UInt32.random(in: 0..<1_000_000, using: &rng))
        let pin = String(repeating: "0", count: 6 - number.count) + number
        let expires = now + Self.pinLifetime
        let digest = SHA256.hex("pin:" + pin)
        try store.write { db in
            try db.execute(sql: "DELETE FROM webPin")
            try db.execute(sql: "INSERT INTO webPin (digest, expires) VALUES (?, ?)", arguments: [digest, expires])
        }
        return (pin, expires)
    }

    /// Exchanges a valid PIN for a new device and its token (nil: wrong or expired PIN).
    /// Counts nothing: the web app pairs through `attempt`, which also keeps the lockout.
    public func redeem(pin: String, deviceName: String, now: Double) throws(CoreError) -> (device: WebDevice, token: String)? {
        let ticket = Self.ticket(pin: pin, deviceName: deviceName)
        let device: WebDevice? = try store.write { db in try Self.redeem(db, ticket, now: now) }
        return device.map { ($0, ticket.token) }
    }

    /// What a pairing attempt from the web came to.
    public enum Attempt: Sendable, Equatable {
        case paired(WebDevice, token: String)
        /// A wrong or expired PIN; `left`: wrong PINs this address may still send before its lock.
        case wrong(left: Int)
        /// Refused unread (or locked by this very failure): too many wrong PINs (PairingLockout).
        case locked(PairingLockout.Lock)
    }

    /// A pairing attempt from `address` (the client's address; an IPv6 client's /64): refused
    /// while that address or everyone is locked out, else the PIN redeemed, a wrong one counted.
    /// One transaction: what it counts is on disk before the answer goes out.
    public func attempt(pin: String, deviceName: String, address: String, now: Double, scope: PairingScope = .web) throws(CoreError) -> Attempt {
        let ticket = Self.ticket(pin: pin, deviceName: deviceName)
        return try store.write { db -> Attempt in
            if let lock = try PairingLockout.lock(db, address: address, now: now) { return .locked(lock) }
            if let device = try Self.redeem(db, ticket, now: now, scope: scope) { return .paired(device, token: ticket.token) }
            try PairingLockout.recordFailure(db, address: address, now: now)
            if let lock = try PairingLockout.lock(db, address: address, now: now) { return .locked(lock) }
            return .wrong(left: try PairingLockout.triesLeft(db, address: address, now: now))
        }
    }

    /// A PIN's digest, the token a redeemed PIN buys (and its digest), the device's name.
    private struct Ticket: Sendable {
        var pin: String
        var digest: String
        var token: String
        var tokenDigest: String
        var name: String
    }

    private static func ticket(pin: String, deviceName: String) -> Ticket {
        var rng = SystemRandomNumberGenerator()
        let token = (0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) }
            .map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        return Ticket(pin: pin, digest: SHA256.hex("pin:" + pin), token: token, tokenDigest: SHA256.hex("token:" + token), name: cleanName(deviceName))
    }

    /// The device a valid, unexpired PIN makes (the PIN used up); nil for any other PIN.
    private static func redeem(_ db: Database, _ t: Ticket, now: Double, scope: PairingScope = .web) throws -> WebDevice? {
        guard t.pin.utf8.count == 6, t.pin.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        try db.execute(sql: "DELETE FROM webPin WHERE expires < ?", arguments: [now])
        guard try Row.fetchOne(db, sql: "SELECT 1 FROM webPin WHERE digest = ?", arguments: [t.digest]) != nil else { return nil }
        try db.execute(sql: "DELETE FROM webPin WHERE digest = ?", arguments: [t.digest])
        try db.execute(sql: "INSERT INTO webDevice (name, tokenDigest, created, lastSeen, scope) VALUES (?, ?, ?, ?, ?)",
                       arguments: [t.name, t.tokenDigest, now, now, scope.rawValue])
        return WebDevice(id: db.lastInsertedRowID, name: t.name, created: now, lastSeen: now, scope: scope)
    }

    /// The device a token belongs to, if the token opens `scope` (nil: unknown, revoked, or
    /// a token for the other: a sync device's token does not open the web app, nor a
    /// browser's sync).
    public func device(token: String, scope: PairingScope = .web) throws(CoreError) -> WebDevice? {
        guard token.utf8.count == 64, token.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else { return nil }
        let digest = SHA256.hex("token:" + token)
        return try store.read { db in
            try Row.fetchOne(db, sql: "SELECT id, name, created, lastSeen, scope FROM webDevice WHERE tokenDigest = ? AND scope = ?",
                             arguments: [digest, scope.rawValue])
                .map(Self.device)
        }
    }

    /// Notes that a device was seen.
    public func touch(_ id: Int64, now: Double) throws(CoreError) {
        try store.write { db in try db.execute(sql: "UPDATE webDevice SET lastSeen = ? WHERE id = ?", arguments: [now, id]) }
    }

    public func devices() throws(CoreError) -> [WebDevice] {
        try store.read { db in
            try Row.fetchAll(db, sql: "SELECT id, name, created, lastSeen, scope FROM webDevice ORDER BY id").map(Self.device)
        }
    }

    /// Ends a device's pairing; false when there was none with that id.
    public func revoke(_ id: Int64) throws(CoreError) -> Bool {
        try store.write { db in
            try db.execute(sql: "DELETE FROM webDevice WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    private static func device(_ row: Row) -> WebDevice {
        WebDevice(id: row["id"], name: row["name"], created: row["created"], lastSeen: row["lastSeen"],
                  scope: (row["scope"] as String?).flatMap(PairingScope.init(rawValue:)) ?? .web)
    }

    /// A device's name as the browser gave it: at most 60 characters, no control characters.
    static func cleanName(_ raw: String) -> String {
        let clean = String(String.UnicodeScalarView(raw.unicodeScalars.filter { !Display.isControl($0) })).trimmingWhitespace()
        return clean.isEmpty ? "browser" : String(clean.prefix(60))
    }
}
