/// Sync as the front-ends see it: for a device, what waits to be uploaded, what the hub took,
/// the hub's changes merged with the cursor they came to (one transaction), and the hub it
/// is paired with; for a hub, a device's changes merged and its own read by cursor. Every
/// rule of sync (what a peer may send, who wins, how a record is applied) is below this.
import FoundationEssentials
import GRDB
import Synchronization

public struct SyncService: Sendable {
    public let store: LibraryStore
    public init(store: LibraryStore) { self.store = store }

    /// How many changes one request carries at most (both ways).
    public static let batchLimit = 2000

    /// The hub a device is paired with (its token is the device's key to it).
    public struct Hub: Sendable, Equatable, Codable {
        public var url: String
        public var token: String
        /// The hub's node id (its cursor is kept per hub).
        public var node: String
        /// Over https: the SHA-256 fingerprint of the hub's certificate, pinned at pairing.
        public var fingerprint: String?
        public init(url: String, token: String, node: String, fingerprint: String? = nil) {
            self.url = url
            self.token = token
            self.node = node
            self.fingerprint = fingerprint
        }
    }

    /// What `sync status` shows.
    public struct Status: Sendable, Equatable, Codable {
        public var node: String
        public var hub: String?
        public var pending: Int
        public var records: Int
        public var cursor: Int64
        public var lastCycle: Double?
        public var lastError: String?
        /// The hub's clock less this device's at the last page read (ms).
        public var hubOffset: Int64?
    }

    // MARK: this node

    public func node() throws(SyncError) -> String {
        try write { db in try SyncJournal.node(db) }
    }

    public func hub() throws(SyncError) -> Hub? {
        try read { db in
            guard let json = try SyncJournal.state(db, "hub") else { return nil }
            return try? JSON.decode(Hub.self, from: json.utf8)
        }
    }

    /// Pairs this device with a hub (nil: forgets it). A new hub's changes are read from
    /// the start; everything here is uploaded to it.
    /// This node's name among its sync devices (schedule entries name the devices they run on).
    public func deviceName() throws(SyncError) -> String {
        try read { db in try SyncJournal.deviceName(db) }
    }

    public func setDeviceName(_ name: String) throws(SyncError) {
        let checked: String
        do { checked = try Names.check(name, option: "--name", maxLength: 64) } catch { throw .refused(error.words) }
        try write { db in
            try SyncJournal.setState(db, "name", checked)
            // Which entries ring here may have changed: the daemon reads the schedule again.
            try db.execute(sql: "UPDATE scheduleVersion SET n = n + 1")
        }
    }

    public func setHub(_ hub: Hub?) throws(SyncError) {
        try write { db in
            let before = try SyncJournal.state(db, "hub").flatMap { try? JSON.decode(Hub.self, from: $0.utf8) }
            try SyncJournal.setState(db, "hub", hub.map { JSON(encoding: $0).line })
            if before?.node != hub?.node {
                try SyncJournal.setState(db, "cursor", nil)
                try SyncJournal.setState(db, "hubEpoch", nil)
                try db.execute(sql: "UPDATE syncField SET pending = 1")
                // Read from the start anyway: the kinds this version knows are known to it.
                try SyncJournal.setState(db, "kinds", Self.knownKinds)
            }
        }
    }

    /// What the daemon looks at once a minute: whether a hub is paired and something waits
    /// (two indexed lookups, not the counts `status` makes).
    public func duty() throws(SyncError) -> (paired: Bool, waiting: Bool) {
        try read { db in
            (try SyncJournal.state(db, "hub") != nil,
             try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM syncField WHERE pending = 1)") ?? false)
        }
    }

    public func status() throws(SyncError) -> Status {
        try read { db in
            let hub = try SyncJournal.state(db, "hub").flatMap { try? JSON.decode(Hub.self, from: $0.utf8) }
            return Status(node: try SyncJournal.state(db, "node") ?? "",
                          hub: hub?.url,
                          pending: try Int.fetchOne(db, sql: "SELECT count(*) FROM syncField WHERE pending = 1") ?? 0,
                          records: try Int.fetchOne(db, sql: "SELECT count(*) FROM (SELECT DISTINCT kind, id FROM syncField)") ?? 0,
                          cursor: try SyncJournal.state(db, "cursor").flatMap { Int64($0) } ?? 0,
                          lastCycle: try SyncJournal.state(db, "lastCycle").flatMap { Double($0) },
                          lastError: try SyncJournal.state(db, "lastError"),
                          hubOffset: try SyncJournal.state(db, "hubOffset").flatMap { Int64($0) })
        }
    }

    /// Notes how the last cycle ended (nil: well).
    public func noteCycle(error: String?, at time: Double) throws(SyncError) {
        try write { db in
            if error == nil { try SyncJournal.setState(db, "lastCycle", String(time)) }
            try SyncJournal.setState(db, "lastError", error.map { String(Display.clean($0).prefix(300)) })
        }
    }

    /// Sets this node's sync clock back to now after the wall clock once ran far ahead (its
    /// stamps would be refused by every peer until real time caught up): the changes waiting
    /// here whose stamps are ahead of now (no peer took them) are stamped again from now;
    /// every other change keeps its stamp (a waiting change stamped in the past must not win
    /// over what others did since), and the clock never goes below the newest stamp kept.
    /// Returns how many waiting changes were stamped again.
    @discardableResult
    public func resetClock() throws(SyncError) -> Int {
        let wall = SyncJournal.wallMilliseconds()
        return try write { db in
            let node = try SyncJournal.node(db)
            guard let now = HybridTimestamp(milliseconds: wall, counter: 0, node: node),
                  let bound = HybridTimestamp(milliseconds: wall + HybridClock.maximumAhead, counter: 0, node: node) else { return 0 }
            // This node's own waiting changes stamped ahead (a change of another node, waiting
            // again after a new pairing, keeps its stamp and its node).
            let ahead = "pending = 1 AND stamp > ? AND substr(stamp, -36) = ?"
            let args: StatementArguments = [bound.description, node]
            let kept = try String.fetchOne(db, sql: "SELECT max(stamp) FROM syncField WHERE NOT (\(ahead))", arguments: args)
                .flatMap(HybridTimestamp.init(text:))
            try SyncJournal.setState(db, "clock", max(now, kept ?? now).description)
            var again = 0
            for row in try Row.fetchAll(db, sql: "SELECT kind, id, field, value FROM syncField WHERE \(ahead) ORDER BY seq", arguments: args) {
                guard let k: String = row["kind"], let kind = SyncKind(rawValue: k), let id: String = row["id"],
                      let field: String = row["field"], let value: String = row["value"] else { continue }
                try db.execute(sql: "DELETE FROM syncField WHERE kind = ? AND id = ? AND field = ?", arguments: [k, id, field])
                try SyncJournal.record(db, kind, id: id, fields: [(field, value)])
                again += 1
            }
            return again
        }
    }

    // MARK: meditations' files

    /// Which meditations' files this device fetches: every one, none (rows only), or those
    /// not larger than a size in bytes.
    public enum FilePolicy: Sendable, Equatable {
        case all
        case none
        case under(Int64)

        /// The largest file fetched (nil: every one).
        public var limit: Int64? {
            switch self {
            case .all: return nil
            case .none: return 0
            case .under(let n): return n
            }
        }

        var text: String {
            switch self {
            case .all: return "all"
            case .none: return "none"
            case .under(let n): return "under:\(n)"
            }
        }

        init(text: String?) {
            switch text {
            case "none"?: self = .none
            case let t? where t.hasPrefix("under:"): self = Int64(t.dropFirst(6)).map { .under(max(0, $0)) } ?? .all
            default: self = .all
            }
        }
    }

    public func filePolicy() throws(SyncError) -> FilePolicy {
        try read { db in FilePolicy(text: try SyncJournal.state(db, "files")) }
    }

    public func setFilePolicy(_ policy: FilePolicy) throws(SyncError) {
        try write { db in try SyncJournal.setState(db, "files", policy == .all ? nil : policy.text) }
    }

    /// The meditations this device knows of whose file is not here, and whether it fetches each.
    public func arriving() throws(SyncError) -> [ArrivingMeditation] {
        let folders = SyncFolders(store)
        return try read { db in
            try SyncMeditations.arriving(db, folders: folders, limit: FilePolicy(text: try SyncJournal.state(db, "files")).limit)
        }
    }

    // MARK: a device's side of a cycle

    /// What waits for the hub (at most `batchLimit`).
    public func pending() throws(SyncError) -> [SyncChange] {
        try read { db in try SyncJournal.pending(db, limit: Self.batchLimit) }
    }

    /// The hub took these (`hub`: the hub's node the cycle talks to; a device paired anew
    /// meanwhile keeps them waiting for its new hub).
    ///
    /// `stored`: the hub's sequence numbers this upload took and nothing else (the hub says
    /// so only then); when this device has read the hub up to just before them, its cursor
    /// moves past them: it need not read its own changes back.
    public func acknowledge(_ changes: [SyncChange], hub: String? = nil, stored: ClosedRange<Int64>? = nil) throws(SyncError) {
        try write { db in
            try Self.stillPaired(db, hub)
            try SyncJournal.acknowledge(db, changes)
            if let stored, stored.lowerBound >= 1,
               (try SyncJournal.state(db, "cursor").flatMap { Int64($0) } ?? 0) == stored.lowerBound - 1 {
                try SyncJournal.setState(db, "cursor", String(stored.upperBound))
            }
        }
    }

    /// Refuses a cycle's write when the device was paired with another hub (or none) since
    /// the cycle began.
    static func stillPaired(_ db: Database, _ hub: String?) throws {
        guard let hub else { return }
        let now = try SyncJournal.state(db, "hub").flatMap { try? JSON.decode(Hub.self, from: $0.utf8) }
        guard now?.node == hub else {
            throw SyncError.refused(both("the device was paired anew during the cycle: nothing of it was kept", "das Gerät wurde während des Abgleichs neu gekoppelt: nichts davon wurde behalten"))
        }
    }

    /// A device that has learnt kinds of record since it last read the hub (a new version:
    /// pages passed over them before) reads the hub from the start again, once; merging
    /// what it holds already changes nothing.
    static var knownKinds: String { SyncKind.allCases.map(\.rawValue).sorted().joined(separator: ",") }

    public func readAgainForNewKinds() throws(SyncError) {
        let known = Self.knownKinds
        try write { db in
            guard try SyncJournal.state(db, "kinds") != known else { return }
            try SyncJournal.setState(db, "cursor", nil)
            try SyncJournal.setState(db, "kinds", known)
        }
    }

    /// Where this device has read the hub's changes to.
    public func cursor() throws(SyncError) -> Int64 {
        try read { db in try SyncJournal.state(db, "cursor").flatMap { Int64($0) } ?? 0 }
    }

    /// How far a hub's clock may be from this device's before its pages are refused.
    public static let maximumHubOffset: Int64 = 3_600_000

    /// A page of the hub's changes: merged, applied, and the cursor moved to `next`, in one
    /// transaction (a cycle cut before its commit reads the page again). The stamps are
    /// checked against the hub's clock as it checked them (`hubTime`; a device whose own
    /// clock is slow still takes them, and its clock moves up to them), a hub's clock more
    /// than an hour from this one's is refused. Returns how many fields changed here.
    @discardableResult
    public func take(_ changes: [SyncChange], next: Int64, hubTime: Int64? = nil, hub: String? = nil) throws(SyncError) -> Int {
        guard changes.count <= Self.batchLimit else { throw .refused(both("more than \(Self.batchLimit) changes in one page", "mehr als \(Self.batchLimit) Änderungen auf einer Seite")) }
        guard next >= 0 else { throw .refused(both("a cursor below zero", "ein Zeiger unter null")) }
        let own = SyncJournal.wallMilliseconds()
        var wall = own
        if let hubTime {
            guard (0...HybridTimestamp.millisecondsLimit).contains(hubTime) else {
                throw .refused(both("the hub's clock reads \(hubTime)", "die Uhr des Hubs zeigt \(hubTime)"))
            }
            guard abs(hubTime - own) <= Self.maximumHubOffset else {
                let minutes = min(abs(hubTime - own) / 60_000, 99_999)
                throw .refused(both("the hub's clock is \(minutes) min \(hubTime > own ? "ahead of" : "behind") this device's: set the clocks (chrony or NTP)",
                                    "die Uhr des Hubs geht \(minutes) min \(hubTime > own ? "vor" : "nach") gegenüber diesem Gerät: stelle die Uhren (chrony oder NTP)"))
            }
            wall = max(own, hubTime)
        }
        let checkedAgainst = wall
        let folders = SyncFolders(store)
        let changed = try write { db in
            try Self.stillPaired(db, hub)
            let changed = try SyncJournal.merge(db, changes, wall: checkedAgainst, folders: folders)
            try SyncJournal.setState(db, "cursor", String(next))
            if let hubTime { try SyncJournal.setState(db, "hubOffset", String(hubTime - own)) }
            return changed
        }
        folders.afterCommit.run()
        return changed
    }

    // MARK: the hub's side

    /// What an upload did on the hub: how many fields changed, and the sequence numbers
    /// they took when those are the upload's alone (nothing else written between them).
    public struct Received: Sendable, Equatable {
        public var changed: Int
        public var stored: ClosedRange<Int64>?
    }

    /// A device's upload, merged and applied in one transaction (all or nothing).
    @discardableResult
    public func receive(_ changes: [SyncChange]) throws(SyncError) -> Int {
        try receiving(changes).changed
    }

    public func receiving(_ changes: [SyncChange]) throws(SyncError) -> Received {
        guard changes.count <= Self.batchLimit else { throw .refused(both("more than \(Self.batchLimit) changes in one upload", "mehr als \(Self.batchLimit) Änderungen in einem Hochladen")) }
        let wall = SyncJournal.wallMilliseconds()
        let folders = SyncFolders(store)
        let received = try write { db -> Received in
            let before = try SyncJournal.lastSeq(db)
            let changed = try SyncJournal.merge(db, changes, wall: wall, folders: folders)
            let after = try SyncJournal.lastSeq(db)
            // Only the upload's own fields in the range (a record stamped again here on hearing
            // a delete it survives would be left out of what the device then skips).
            return Received(changed: changed, stored: changed > 0 && after - before == Int64(changed) ? (before + 1)...after : nil)
        }
        folders.afterCommit.run()
        return received
    }

    /// The changes written here after `cursor` (at most `batchLimit`), the cursor to ask
    /// from next, and whether there are more.
    public func changes(after cursor: Int64) throws(SyncError) -> (changes: [SyncChange], next: Int64, more: Bool, last: Int64) {
        try read { db in
            let page = try SyncJournal.changes(db, after: max(0, cursor), limit: Self.batchLimit)
            let more = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM syncField WHERE seq > ?)", arguments: [page.last]) ?? false
            return (page.changes, page.last, more, try SyncJournal.lastSeq(db))
        }
    }

    /// The hub's epoch (made on first use): it changes when a device is found to have read
    /// past the hub's last change (`cursor`, where the asking device has read to: the hub
    /// was restored from an older backup, or its catalog replaced), so that every device,
    /// also one that has not read that far, learns of it.
    public func epoch(seenCursor cursor: Int64?) throws(SyncError) -> String {
        // Read first (every request asks): written only when made or changed.
        let seen = try read { db -> String? in
            guard let epoch = try SyncJournal.state(db, "epoch"), (cursor ?? 0) <= (try SyncJournal.lastSeq(db)) else { return nil }
            return epoch
        }
        if let seen { return seen }
        return try write { db in
            let last = try SyncJournal.lastSeq(db)
            if let epoch = try SyncJournal.state(db, "epoch"), (cursor ?? 0) <= last { return epoch }
            let fresh = UUID().uuidString.lowercased()
            try SyncJournal.setState(db, "epoch", fresh)
            return fresh
        }
    }

    /// A hub's epoch as a device heard it: the first one is kept; another one means the
    /// hub went back (restored from an older backup): this device reads it again from the
    /// start and sends it everything here (merging what it has changes nothing). Returns
    /// whether it went back.
    public func heardEpoch(_ epoch: String?, hub: String) throws(SyncError) -> Bool {
        guard let epoch, HybridTimestamp.isNodeID(epoch) else { return false }
        return try write { db in
            try Self.stillPaired(db, hub)
            let known = try SyncJournal.state(db, "hubEpoch")
            try SyncJournal.setState(db, "hubEpoch", epoch)
            guard let known, known != epoch else { return false }
            try SyncJournal.setState(db, "cursor", nil)
            try db.execute(sql: "UPDATE syncField SET pending = 1")
            return true
        }
    }

    /// A paired device read up to `cursor` (pairing notes it at 0).
    public func noteRead(device: Int64, cursor: Int64) throws(SyncError) {
        let now = Date().timeIntervalSince1970
        try write { db in try SyncJournal.noteRead(db, device: device, cursor: cursor, now: now) }
    }

    /// How many of `paired` (the hub's paired devices) have paired for sync.
    public func peers(paired: Set<Int64>) throws(SyncError) -> Int {
        try read { db in try Int64.fetchAll(db, sql: "SELECT device FROM syncPeer").filter(paired.contains).count }
    }

    /// Collects the deletes every device of `paired` (the hub's paired devices) has read.
    @discardableResult
    public func collect(paired: Set<Int64>) throws(SyncError) -> Int {
        try write { db in try SyncJournal.collect(db, paired: paired) }
    }

    // MARK: the store, with sync's errors kept

    private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) throws(SyncError) -> T {
        do { return try store.read(body) } catch { throw .store(error) }
    }

    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) throws(SyncError) -> T {
        let refusal = Mutex<SyncError?>(nil)
        do {
            return try store.write { db in
                do { return try body(db) } catch let e as SyncError {
                    refusal.withLock { $0 = e }
                    throw e
                }
            }
        } catch {
            if let e = refusal.withLock({ $0 }) { throw e }
            throw .store(error)
        }
    }
}
