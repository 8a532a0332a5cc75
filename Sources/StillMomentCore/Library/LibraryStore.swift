import CXXHash
import FoundationEssentials
import Glibc
import GRDB
import Synchronization

/// The app-owned store: copied files under `Meditations/` and `Sounds/`, and the catalog
/// in `library.sqlite` (GRDB DatabasePool, WAL, busy timeout). Everything is private to
/// the user (folders 0700, files 0600). Nothing stored is ever deleted by inference:
/// only temporary files of dead imports are removed on their own (see Consistency.swift).
public final class LibraryStore: Sendable {
    public let home: String
    public let meditationsFolder: String
    public let soundsFolder: String
    public let lostAndFound: String
    public let databasePath: String
    let pool: any DatabaseWriter
    /// Opened read-only because the store cannot be written (a read-only or full file
    /// system): reading commands work, writing ones fail with the reason.
    public let readOnlyReason: String?
    private let openingNotes = Mutex<[String]>([])

    /// Opens (and creates) the store. Migrations run exactly once even when several
    /// processes open a new store together (they take turns on `library.lock`). Leftovers
    /// of imports that died are removed; a catalog that is missing or empty beside stored
    /// files is rebuilt from them (`notes` says so). The schema is Core's and the
    /// front-ends' registered so far (CatalogMigrations.swift).
    public convenience init(home: String = Paths.home) throws(CoreError) {
        try self.init(home: home, extensions: Self.registeredMigrations)
    }

    /// Opens the store with Core's migrations and `extensions` (a test plays a process that
    /// registered other ones).
    init(home: String, extensions: [CatalogMigration]) throws(CoreError) {
        self.home = home
        meditationsFolder = home + "/Meditations"
        soundsFolder = home + "/Sounds"
        lostAndFound = home + "/Lost+Found"
        databasePath = home + "/library.sqlite"
        var config = Configuration()
        config.busyMode = .timeout(30)
        config.label = "stillmoment"
        let path = databasePath
        let migrator = Self.migrator(extensions: extensions)
        var writable: (any DatabaseWriter)?
        var failure: CoreError?
        do {
            try Paths.makeFolder(home)
            try Paths.makeFolder(meditationsFolder)
            try Paths.makeFolder(soundsFolder)
            chmod(meditationsFolder, 0o700)
            try Self.makePrivate(path)
            // Under the lock: a new database switches to WAL (which needs it alone, and
            // SQLite does not wait for that) and migrates, one process at a time.
            var setAside: String?
            writable = try Self.withLock(home + "/library.lock") { () throws -> DatabasePool in
                do {
                    let pool = try DatabasePool(path: path, configuration: config)
                    try migrator.migrate(pool)
                    return pool
                } catch let error as DatabaseError where error.resultCode == .SQLITE_NOTADB || error.resultCode == .SQLITE_CORRUPT {
                    // Not a database at all (overwritten, a bad copy): kept aside, never
                    // deleted, and a new catalog is rebuilt from the stored files.
                    let aside = path + ".damaged-\(time(nil))"
                    guard rename(path, aside) == 0 else { throw error }
                    for suffix in ["-wal", "-shm"] { rename(path + suffix, aside + suffix) }
                    setAside = aside
                    try Self.makePrivate(path)
                    let pool = try DatabasePool(path: path, configuration: config)
                    try migrator.migrate(pool)
                    return pool
                }
            }
            if let setAside {
                openingNotes.withLock {
                    $0.append(tr("the catalog was not a database; it is kept as \(setAside) and a new one is built from the stored files",
                                 "der Katalog war keine Datenbank; er liegt jetzt unter \(setAside), ein neuer wird aus den gespeicherten Dateien gebaut"))
                }
            }
        } catch let error as CoreError {
            failure = error
        } catch {
            failure = CoreError.io(path: databasePath, reason: both("cannot open the catalog: ", "der Katalog lässt sich nicht öffnen: ") + Self.reason(error))
        }
        if let writable {
            pool = writable
            readOnlyReason = nil
        } else {
            // A read-only or full file system: read what is there, change nothing.
            var st = stat()
            guard let failure, stat(path, &st) == 0, st.st_size > 0 else {
                throw failure ?? CoreError.io(path: path, reason: both("cannot open the catalog", "der Katalog lässt sich nicht öffnen"))
            }
            var readConfig = config
            readConfig.readonly = true
            do {
                // immutable: SQLite reads the WAL-mode file without creating its -shm,
                // which a read-only or full file system does not allow.
                pool = try DatabaseQueue(path: "file:" + Self.uriEscaped(path) + "?immutable=1", configuration: readConfig)
                _ = try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM meditation") }
            } catch {
                throw failure
            }
            readOnlyReason = Self.unwritableReason(home) ?? failure.description
        }
        if readOnlyReason == nil {
            try recoverInterruptedImports()
            try rebuildIfCatalogLost()
        }
    }

    /// What opening the store did that the user should hear of (a rebuilt catalog).
    public var notes: [String] { openingNotes.withLock { $0 } }
    func note(_ line: String) { openingNotes.withLock { $0.append(line) } }

    /// Creates the catalog file 0600 before SQLite does (its `-wal` and `-shm` files take
    /// the database's mode), and makes existing ones private.
    static func makePrivate(_ path: String) throws(CoreError) {
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd >= 0 {
            close(fd)
        } else if errno != EEXIST {
            throw CoreError.io(path: path, reason: .systemError)
        }
        for file in [path, path + "-wal", path + "-shm"] {
            var st = stat()
            if lstat(file, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_mode & 0o077 != 0 {
                chmod(file, 0o600)
            }
        }
    }

    /// A path as the path of a `file:` URI.
    static func uriEscaped(_ path: String) -> String {
        var out = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "%"), 0..<0x21, 0x7F...0xFF:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            default:
                out.append(Character(Unicode.Scalar(byte)))
            }
        }
        return out
    }

    /// Why a store that reads cannot be written, from the file system itself (SQLite only
    /// says "unable to open database file"): read-only, full, or a folder we may not write.
    static func unwritableReason(_ home: String) -> String? {
        var fs = statvfs()
        if statvfs(home, &fs) == 0 {
            if fs.f_flag & UInt(ST_RDONLY) != 0 {
                return tr("\(home) is on a read-only file system", "\(home) liegt auf einem schreibgeschützten Dateisystem")
            }
            if fs.f_bavail == 0 {
                return tr("the disk is full (\(home))", "der Datenträger ist voll (\(home))")
            }
        }
        if access(home, W_OK) != 0 || access(home + "/library.sqlite", W_OK) != 0 {
            return tr("\(home) is not writable for this user", "\(home) ist für diesen Benutzer nicht beschreibbar")
        }
        return nil
    }

    /// SQLite's words for a failure, without GRDB's dump of the statement.
    static func reason(_ error: any Error) -> String {
        if let db = error as? DatabaseError {
            switch db.resultCode {
            case .SQLITE_FULL: return tr("the disk is full", "der Datenträger ist voll")
            case .SQLITE_READONLY: return tr("the store is read-only", "die Bibliothek ist schreibgeschützt")
            case .SQLITE_CORRUPT, .SQLITE_NOTADB:
                return tr("the catalog is damaged (see `stillmoment library verify`)", "der Katalog ist beschädigt (siehe `stillmoment library verify`)")
            case .SQLITE_IOERR:
                let full = errno == ENOSPC
                let message = db.message ?? "I/O error"
                return full ? tr("the disk is full", "der Datenträger ist voll")
                            : tr("the catalog cannot be read or written (\(message))", "der Katalog lässt sich nicht lesen oder schreiben (\(message))")
            default: return db.message ?? "\(db.resultCode)"
            }
        }
        return "\(error)"
    }

    /// Runs `body` holding an exclusive flock on `path`.
    static func withLock<T>(_ path: String, _ body: () throws -> T) throws -> T {
        var fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd < 0 && (errno == EROFS || errno == EACCES) { fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { throw CoreError.io(path: path, reason: .systemError) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            if errno != EINTR { throw CoreError.io(path: path, reason: .systemError) }
        }
        return try body()
    }

    // MARK: reading

    /// The meditations whose rows can be used; damaged rows are left out here and
    /// reported by `verify` (`catalogRows`).
    public func all() throws(CoreError) -> [Meditation] {
        try catalogRows().meditations
    }

    public func customSounds() throws(CoreError) -> [CustomSound] {
        try catalogRows().sounds
    }

    package func read<T: Sendable>(_ body: @Sendable (Database) throws -> T) throws(CoreError) -> T {
        do { return try pool.read(body) } catch let error as CoreError {
            throw error
        } catch {
            throw CoreError.io(path: databasePath, reason: .rendering { Self.reason(error) })
        }
    }

    /// `read` for a body that stays on the caller's thread (a cursor whose rows are
    /// handed on as they come): not Sendable, nothing escapes.
    func readInPlace(_ body: (Database) throws -> Void) throws(CoreError) {
        do { try pool.read(body) } catch let error as CoreError {
            throw error
        } catch {
            throw CoreError.io(path: databasePath, reason: .rendering { Self.reason(error) })
        }
    }

    package func write<T: Sendable>(_ body: @Sendable (Database) throws -> T) throws(CoreError) -> T {
        if let readOnlyReason {
            throw CoreError.io(path: databasePath, reason: both("cannot change the library: \(readOnlyReason)", "die Bibliothek lässt sich nicht ändern: \(readOnlyReason)"))
        }
        do { return try pool.write(body) } catch let error as CoreError {
            throw error
        } catch {
            throw CoreError.io(path: databasePath, reason: .rendering { Self.reason(error) })
        }
    }

    /// Finds a meditation by UUID, unique UUID prefix, or exact name (case-insensitive).
    public func find(_ key: String) throws(CoreError) -> Meditation {
        let all = try all()
        let k = key.lowercased()
        if let exact = all.first(where: { $0.id == k }) { return exact }
        let byPrefix = all.filter { $0.id.hasPrefix(k) }
        if byPrefix.count == 1 { return byPrefix[0] }
        let byName = all.filter { $0.name.lowercased() == k }
        if byName.count == 1 { return byName[0] }
        if byPrefix.count > 1 || byName.count > 1 {
            let names = (byPrefix.isEmpty ? byName : byPrefix).map { "\($0.id.prefix(8)) \($0.name)" }
            throw CoreError.ambiguous(key: Display.clean(key), matches: names)
        }
        // A meditation synced from another device whose file is not here yet.
        if let a = try? SyncService(store: self).arriving().first(where: { $0.id == k || $0.id.hasPrefix(k) || $0.name.lowercased() == k }) {
            let mb = { (b: Int64) in "\(max(0, b) / 1_000_000) MB" }
            let name = Display.clean(a.name)
            throw CoreError.badRequest(a.fetched
                ? both("'\(name)' is arriving from the sync hub (\(mb(a.have)) of \(mb(a.size))): it plays once its file is here",
                       "'\(name)' kommt gerade vom Sync-Hub (\(mb(a.have)) von \(mb(a.size))): sie spielt, sobald ihre Datei hier ist")
                : both("'\(name)' is kept on the sync hub only (`stillmoment sync files` says which files this device fetches)",
                       "'\(name)' liegt nur auf dem Sync-Hub (`stillmoment sync files` sagt, welche Dateien dieses Gerät holt)"))
        }
        let damaged = (try? catalogRows().damaged.count) ?? 0
        let hint: LocalizedText = damaged == 0 ? .same("")
            : damaged == 1 ? both("; 1 catalog entry is damaged (see `stillmoment library verify`)",
                                "; 1 Katalogeintrag ist beschädigt (siehe `stillmoment library verify`)")
            : both("; \(damaged) catalog entries are damaged (see `stillmoment library verify`)",
                 "; \(damaged) Katalogeinträge sind beschädigt (siehe `stillmoment library verify`)")
        throw CoreError.notFound(key: Display.clean(key), hint: hint)
    }

    /// The stored copy's path. Rows are checked when read, so `storedFile` is a name the
    /// store made (`<UUID>.<ext>`); anything else resolves to nothing that exists.
    public func path(of m: Meditation) -> String {
        meditationsFolder + "/" + (StoredName.isMeditation(m.storedFile) ? m.storedFile : ".invalid")
    }

    /// Whether the stored copy is there and unchanged (size, then hash).
    public func copyIsIntact(_ m: Meditation) -> Bool {
        var st = stat()
        guard stat(path(of: m), &st) == 0, Int64(st.st_size) == m.size else { return false }
        return (try? ContentHash.of(file: path(of: m))) == m.contentHash
    }

    /// Stores an edit of a meditation (the fields that changed from `before`, or from the
    /// row as stored, recorded for sync in the same transaction).
    public func update(_ m: Meditation, before: Meditation? = nil) throws(CoreError) {
        try write { db in
            let old = try before ?? Meditation.fetchOne(db, key: m.id)
            try m.update(db)
            if let old { try SyncMeditations.record(db, m, before: old) }
        }
    }

    public func savePosition(id: String, ms: Int64?) throws(CoreError) {
        try write { db in
            try db.execute(sql: "UPDATE meditation SET lastPosition = ? WHERE id = ?", arguments: [ms, id])
        }
    }

    /// Deletes the row, then the file (a crash in between leaves a file without a row,
    /// which `library verify --repair` adopts back). A meditation that schedule entries
    /// play only with `force` (they then show as broken), else the error names them.
    public func delete(_ m: Meditation, force: Bool = false) throws(CoreError) {
        let users = try ScheduleStore(store: self).entries(using: m.id)
        if !users.isEmpty && !force {
            throw ScheduleStore.inUse(both("the meditation '\(m.name)'", "die Meditation '\(m.name)'"), by: users)
        }
        try ScheduleStore(store: self).keepName(m.name, of: m.id, in: users)
        _ = try write { db in
            try m.delete(db)
            try SyncJournal.recordDelete(db, .meditation, id: m.id)
        }
        if unlink(path(of: m)) != 0 && errno != ENOENT {
            throw CoreError.io(path: path(of: m), reason: .systemError)
        }
    }

    /// Removes a temporary file nobody holds locked, holding its lock while it does: an
    /// import that is just taking the lock finds its file unlinked once it gets it, and
    /// makes a new one (checking only, then removing, let an import take the lock in
    /// between and lose its copy: `library verify --repair` racing 20 imports lost one).
    static func removeIfUnlocked(_ path: String) {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return }
        var mine = stat(), now = stat()
        // Still the same file under that name (not one made anew meanwhile).
        guard fstat(fd, &mine) == 0, lstat(path, &now) == 0, mine.st_dev == now.st_dev, mine.st_ino == now.st_ino else { return }
        unlink(path)
    }

    static func isUnlocked(_ path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return flock(fd, LOCK_EX | LOCK_NB) == 0
    }

    /// The names in a folder (raw bytes that are not UTF-8 are kept as they decode).
    static func list(_ folder: String) -> [String] {
        guard let dir = opendir(folder) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Free bytes on the store's file system.
    public func freeBytes() -> Int64 {
        var s = statvfs()
        guard statvfs(meditationsFolder, &s) == 0 else { return 0 }
        return Int64(s.f_bavail) * Int64(s.f_frsize)
    }
}

/// XXH3-128 of a file's content, as hex.
public enum ContentHash {
    public static func of(file path: String) throws(CoreError) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CoreError.io(path: path, reason: .systemError) }
        defer { close(fd) }
        let hasher = Hasher128()
        var buf = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw CoreError.io(path: path, reason: .systemError)
            }
            if n == 0 { break }
            buf.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        return hasher.finish()
    }
}

/// Streaming XXH3-128 (libxxhash).
struct Hasher128: ~Copyable {
    private let state: OpaquePointer

    init() {
        state = XXH3_createState()
        XXH3_128bits_reset(state)
    }

    deinit { XXH3_freeState(state) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        XXH3_128bits_update(state, bytes.baseAddress, bytes.count)
    }

    func finish() -> String {
        let h = XXH3_128bits_digest(state)
        func hex(_ v: UInt64) -> String {
            let s = String(v, radix: 16)
            return String(repeating: "0", count: 16 - s.count) + s
        }
        return hex(h.high64) + hex(h.low64)
    }
}

extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
