/// Guided meditations in the sync journal. A meditation is a record of its own fields: the
/// file (what its content is: hash, size, container, length, loudness, the imported file's
/// name, when it was imported; set once) and what a user edits (name, teacher, album, trim,
/// gongs), each its own field, so an edit on one device and another edit on another both
/// stay. Where it was last stopped stays on its device. The row arrives before its file: a
/// meditation whose content is not here yet is "arriving" (listed, not playable) until
/// `SyncFiles` has fetched, verified and adopted it. The same content imported on two devices
/// is two meditations (nothing is lost), sharing one file (a hard link). A delete heard from a
/// peer takes the row away and moves the file to `Lost+Found/`, never deletes it.
import FoundationEssentials
import Glibc
import GRDB
import Synchronization

/// What a meditation's content is, as its `file` field carries it.
public struct SyncFileFacts: Sendable, Equatable, Codable {
    public var hash: String
    public var size: Int64
    /// mp3 or m4a
    public var ext: String
    public var frames: Int64
    public var rate: Int
    public var gain: Double
    public var original: String
    /// When it was imported (ms since 1970).
    public var added: Int64

    /// The largest file sync takes (the importer's own limit is the disk).
    public static let maximumSize: Int64 = 8 << 30

    init(_ m: Meditation) {
        hash = m.contentHash
        size = m.size
        ext = m.storedFile.hasSuffix(".m4a") ? "m4a" : "mp3"
        frames = m.durationFrames
        rate = m.sampleRate
        gain = m.loudnessGain
        original = m.originalName
        added = Int64((m.dateAdded.timeIntervalSince1970 * 1000).rounded())
    }

    /// Whether `s` is a content hash as the store writes it (32 lower-case hex digits).
    public static func isHash(_ s: String) -> Bool {
        s.utf8.count == 32 && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// What is wrong with facts from a peer, or nil.
    var damage: String? {
        guard Self.isHash(hash) else { return "its hash is not one the store makes" }
        guard (1...Self.maximumSize).contains(size) else { return "its size \(size) is out of range" }
        guard ext == "mp3" || ext == "m4a" else { return "its container is not mp3 or m4a" }
        guard (0...253_402_300_799_000).contains(added) else { return "its import time is out of range" }
        guard original.utf8.count <= 1024, !original.unicodeScalars.contains(where: Display.isControl) else {
            return "its file name is not one the store keeps"
        }
        return meditation(id: "00000000-0000-0000-0000-000000000000", name: "-").damage
    }

    /// The catalog row these facts make for record `id` (edited fields apart).
    func meditation(id: String, name: String) -> Meditation {
        Meditation(id: id, storedFile: "\(id).\(ext)", originalName: original, durationFrames: frames, sampleRate: rate,
                   teacher: "", name: name, album: nil, dateAdded: Date(timeIntervalSince1970: Double(added) / 1000),
                   trimStart: nil, trimEnd: nil, startGong: nil, endGong: nil, size: size, contentHash: hash,
                   loudnessGain: gain, lastPosition: nil)
    }
}

/// A meditation this device knows of whose file is not here.
public struct ArrivingMeditation: Sendable, Equatable, Codable {
    public var id: String
    public var name: String
    public var teacher: String
    public var hash: String
    public var size: Int64
    /// Bytes of it fetched so far.
    public var have: Int64
    /// ms
    public var duration: Int64
    /// Whether this device fetches it (`sync files`); false: kept on the hub only.
    public var fetched: Bool
}

public enum SyncMeditations {
    /// The edited fields, as the journal names them.
    static let editFields = ["name", "teacher", "album", "trimStart", "trimEnd", "startGong", "endGong"]

    // MARK: writing (in the library's own transactions)

    /// Records a meditation: every field for a new one (`before` nil), else those an edit changed.
    static func record(_ db: Database, _ m: Meditation, before: Meditation? = nil) throws {
        let now = values(m)
        var fields: [(String, String)] = []
        if let before {
            let then = values(before)
            for f in editFields where now[f] != then[f] { fields.append((f, now[f] ?? "null")) }
        } else {
            fields.append(("file", JSON(encoding: SyncFileFacts(m)).line))
            for f in editFields { fields.append((f, now[f] ?? "null")) }
        }
        if !fields.isEmpty { try SyncJournal.record(db, .meditation, id: m.id, fields: fields) }
    }

    private static func values(_ m: Meditation) -> [String: String] {
        func text(_ s: String?) -> String { s.map { JSON.string($0).line } ?? "null" }
        func number(_ n: Int64?) -> String { n.map { JSON.number(Double($0)).line } ?? "null" }
        return ["name": text(m.name), "teacher": text(m.teacher), "album": text(m.album),
                "trimStart": number(m.trimStart), "trimEnd": number(m.trimEnd),
                "startGong": text(m.startGong), "endGong": text(m.endGong)]
    }

    /// The catalog's migration: one content may be two meditations (made on two devices
    /// before they met), so the content hash stops being unique (the table rebuilt the way
    /// SQLite describes; GRDB runs a migration with foreign keys off and checks them before
    /// it commits); and every meditation there is, recorded.
    static func migrate(_ db: Database) throws {
        try db.create(table: "meditationNew") { t in LibraryStore.meditationColumns(t, uniqueHash: false) }
        let columns = ["id", "storedFile", "originalName", "durationFrames", "sampleRate", "teacher", "name", "album", "dateAdded",
                       "trimStart", "trimEnd", "startGong", "endGong", "size", "contentHash", "loudnessGain", "lastPosition"]
            .joined(separator: ", ")
        try db.execute(sql: "INSERT INTO meditationNew (\(columns)) SELECT \(columns) FROM meditation")
        try db.execute(sql: "DROP TABLE meditation")
        try db.execute(sql: "ALTER TABLE meditationNew RENAME TO meditation")
        try db.execute(sql: "CREATE INDEX meditationContentHash ON meditation (contentHash)")
        // The old table's trigger went with it: a deleted meditation still tells the schedule.
        try db.execute(sql: "CREATE TRIGGER IF NOT EXISTS meditationRemoved AFTER DELETE ON meditation BEGIN UPDATE scheduleVersion SET n = n + 1; END")
        try seed(db)
    }

    private static func seed(_ db: Database) throws {
        for row in try Row.fetchAll(db, sql: "SELECT * FROM meditation") {
            if let m = try? Meditation(row: row), m.damage == nil { try record(db, m) }
        }
    }

    // MARK: reading a peer's values

    static func check(_ c: SyncChange) throws(SyncError) {
        let value = try? JSON.decode(JSON.self, from: c.value.utf8)
        func refuse(_ en: String, _ de: String) -> SyncError {
            .refused(both("meditation \(c.id) \(c.field): \(en)", "Meditation \(c.id) \(c.field): \(de)"))
        }
        switch c.field {
        case "file":
            guard let facts = try? JSON.decode(SyncFileFacts.self, from: c.value.utf8, strict: true) else {
                throw refuse("not what a file is", "keine Angabe einer Datei")
            }
            if let damage = facts.damage { throw refuse(damage, damage) }
        case "name", "teacher", "album":
            if c.field != "name", case .null? = value { return }
            guard case .string(let s)? = value else { throw refuse("not a text", "kein Text") }
            do { _ = try Names.check(s, option: c.field, maxLength: 200, allowEmpty: c.field == "teacher") } catch { throw .refused(error.words) }
        case "trimStart", "trimEnd":
            if case .null? = value { return }
            guard case .number(let n)? = value, n >= 0, n <= Double(Meditation.maxMilliseconds), n == n.rounded() else {
                throw refuse("not a time in ms", "keine Zeit in ms")
            }
        case "startGong", "endGong":
            if case .null? = value { return }
            guard case .string(let s)? = value, !s.isEmpty, s.utf8.count <= 100,
                  !s.unicodeScalars.contains(where: { Display.isControl($0) || $0 == "/" }) else {
                throw refuse("not a sound's id", "keine Kennung eines Klangs")
            }
        default:
            throw refuse("is not a field of ours", "ist kein Feld von uns")
        }
    }

    // MARK: applying

    /// A live record's row as the journal has it (nil: deleted, or without its file's facts).
    static func row(_ id: String, _ fields: [String: SyncChange]) -> Meditation? {
        guard !SyncJournal.isDeleted(fields), let file = fields["file"],
              let facts = try? JSON.decode(SyncFileFacts.self, from: file.value.utf8), facts.damage == nil else { return nil }
        func json(_ f: String) -> JSON? { fields[f].flatMap { try? JSON.decode(JSON.self, from: $0.value.utf8) } }
        func ms(_ f: String) -> Int64? { json(f)?.number.map { Int64($0) } }
        var m = facts.meditation(id: id, name: json("name")?.string ?? facts.original)
        // A peer's loudness claim is not measured here: at most +24 dB of gain (a quiet
        // talk's usual need), never the noise floor at full scale.
        m.loudnessGain = min(m.loudnessGain, 24)
        m.teacher = json("teacher")?.string ?? ""
        m.album = json("album")?.string
        m.startGong = json("startGong")?.string
        m.endGong = json("endGong")?.string
        // A trim that does not fit the meditation (two devices trimmed apart) is dropped,
        // the same way everywhere.
        let length = m.durationMilliseconds
        m.trimStart = ms("trimStart").flatMap { (0...length).contains($0) ? $0 : nil }
        m.trimEnd = ms("trimEnd").flatMap { (0...length).contains($0) ? $0 : nil }
        if let s = m.trimStart, let e = m.trimEnd, s >= e { m.trimStart = nil; m.trimEnd = nil }
        return m
    }

    /// The meditations `ids` as the journal has them: an edit applied to the row, a delete
    /// takes it away (its file to `Lost+Found/`), a new one gets its row at once when its
    /// content is here already (another meditation of it: a hard link), else it is arriving.
    static func apply(_ db: Database, ids: Set<String>, folders: SyncFolders) throws {
        let records = try SyncJournal.records(db, .meditation, ids: ids)
        for id in ids {
            guard let fields = records[id] else { continue }
            let here = try Meditation.fetchOne(db, key: id)
            guard let wanted = row(id, fields) else {
                if let here, SyncJournal.isDeleted(fields) { try remove(here, db, folders) }
                continue
            }
            if var here {
                // What a user edits comes from the journal; what the file is stays as it is here.
                let before = here
                here.name = wanted.name
                here.teacher = wanted.teacher
                here.album = wanted.album
                here.trimStart = wanted.trimStart
                here.trimEnd = wanted.trimEnd
                here.startGong = wanted.startGong
                here.endGong = wanted.endGong
                if here != before { try here.update(db) }
                continue
            }
            // Its content under another meditation here: the same file, linked.
            if let twin = try Meditation.fetchOne(db, sql: "SELECT * FROM meditation WHERE contentHash = ? AND size = ? LIMIT 1",
                                                  arguments: [wanted.contentHash, wanted.size]),
               twin.damage == nil {
                let target = folders.meditations + "/" + wanted.storedFile
                if link(folders.meditations + "/" + twin.storedFile, target) == 0 || errno == EEXIST {
                    try wanted.insert(db)
                }
            }
        }
    }

    /// A meditation a peer deleted: the row goes (schedule entries that play it keep its
    /// name and show broken, as after a local delete); the file goes to `Lost+Found/` unless
    /// another meditation here holds the same content.
    private static func remove(_ m: Meditation, _ db: Database, _ folders: SyncFolders) throws {
        let shared = try Int.fetchOne(db, sql: "SELECT count(*) FROM meditation WHERE contentHash = ? AND id <> ?", arguments: [m.contentHash, m.id]) ?? 0
        try db.execute(sql: "DELETE FROM meditation WHERE id = ?", arguments: [m.id])
        let path = folders.meditations + "/" + m.storedFile
        let base = "\(Importer.slug(m.name).prefix(80))-\(m.id.prefix(8)).\(m.storedFile.hasSuffix(".m4a") ? "m4a" : "mp3")"
        let lostAndFound = folders.lostAndFound
        folders.afterCommit.add {
            if shared > 0 {
                unlink(path)
                return
            }
            try? Paths.makeFolder(lostAndFound)
            var target = lostAndFound + "/" + base
            var n = 1
            while link(path, target) != 0 {
                guard errno == EEXIST, n < 1000 else { return }   // the row is gone; the file stays (verify adopts it back)
                n += 1
                target = lostAndFound + "/\(n)-" + base
            }
            unlink(path)
        }
    }

    /// The meditations this device knows of whose file is not here (`limit`: fetched only
    /// when not larger; nil: every one; 0: none).
    static func arriving(_ db: Database, folders: SyncFolders, limit: Int64?) throws -> [ArrivingMeditation] {
        let here = Set(try String.fetchAll(db, sql: "SELECT id FROM meditation"))
        var out: [ArrivingMeditation] = []
        for (id, fields) in try SyncJournal.records(db, .meditation) where !here.contains(id) {
            guard let m = row(id, fields) else { continue }
            out.append(ArrivingMeditation(id: id, name: m.name, teacher: m.teacher, hash: m.contentHash, size: m.size,
                                          have: SyncFiles.partSize(m.contentHash, folders: folders),
                                          duration: m.durationMilliseconds, fetched: limit.map { m.size <= $0 } ?? true))
        }
        return out.sorted { ($0.name.lowercased(), $0.id) < ($1.name.lowercased(), $1.id) }
    }
}

/// Where a store keeps meditations and what it lost (sync applies without the store object).
public struct SyncFolders: Sendable {
    public var meditations: String
    public var sounds: String
    public var lostAndFound: String
    /// The store's `settings.json` (shared settings from a peer are written there).
    public var settings: String
    /// The store (what runs after the commit reads it again).
    let store: LibraryStore
    /// Files to move once the transaction that took their rows away has committed (a
    /// transaction that rolls back leaves its rows and their files as they were).
    let afterCommit = AfterCommit()
    public init(_ store: LibraryStore) {
        meditations = store.meditationsFolder
        sounds = store.soundsFolder
        lostAndFound = store.lostAndFound
        settings = store.home + "/settings.json"
        self.store = store
    }
}

/// Work a transaction leaves for after its commit.
final class AfterCommit: Sendable {
    private let work = Mutex<[@Sendable () -> Void]>([])
    func add(_ body: @escaping @Sendable () -> Void) { work.withLock { $0.append(body) } }
    /// Runs what was left, once.
    func run() {
        let list = work.withLock { list in defer { list = [] }; return list }
        list.forEach { $0() }
    }
}
