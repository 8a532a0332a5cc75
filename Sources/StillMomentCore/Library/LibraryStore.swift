import CXXHash
import FoundationEssentials
import Glibc
import GRDB

/// The app-owned store: copied files under `Meditations/` and `Sounds/`, and the catalog
/// in `library.sqlite` (GRDB DatabasePool, WAL, busy timeout).
public final class LibraryStore: Sendable {
    public let home: String
    public let meditationsFolder: String
    public let soundsFolder: String
    public let databasePath: String
    let pool: DatabasePool

    /// Opens (and creates) the store. Migrations run exactly once even when several
    /// processes open a new store together (they take turns on `library.lock`). Leftovers
    /// of imports that died are removed.
    public init(home: String = Paths.home) throws(CoreError) {
        self.home = home
        meditationsFolder = home + "/Meditations"
        soundsFolder = home + "/Sounds"
        databasePath = home + "/library.sqlite"
        try Paths.makeFolder(home)
        try Paths.makeFolder(meditationsFolder)
        try Paths.makeFolder(soundsFolder)
        chmod(meditationsFolder, 0o700)
        var config = Configuration()
        config.busyMode = .timeout(30)
        config.label = "stillmoment"
        do {
            // Under the lock: a new database switches to WAL (which needs it alone, and
            // SQLite does not wait for that) and migrates, one process at a time.
            let path = databasePath
            pool = try Self.withLock(home + "/library.lock") { () throws -> DatabasePool in
                let pool = try DatabasePool(path: path, configuration: config)
                try Self.migrator.migrate(pool)
                return pool
            }
        } catch let error as CoreError {
            throw error
        } catch {
            throw CoreError.io(path: databasePath, reason: "cannot open the catalog: \(error)")
        }
        try recoverInterruptedImports()
    }

    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.create(table: "meditation") { t in
                t.primaryKey("id", .text)
                t.column("storedFile", .text).notNull().unique()
                t.column("originalName", .text).notNull()
                t.column("durationFrames", .integer).notNull()
                t.column("sampleRate", .integer).notNull()
                t.column("teacher", .text).notNull()
                t.column("name", .text).notNull()
                t.column("album", .text)
                t.column("dateAdded", .datetime).notNull()
                t.column("trimStart", .integer)
                t.column("trimEnd", .integer)
                t.column("startGong", .text)
                t.column("endGong", .text)
                t.column("size", .integer).notNull()
                t.column("contentHash", .text).notNull().unique()
                t.column("loudnessGain", .double).notNull()
                t.column("lastPosition", .integer)
            }
            try db.create(table: "customSound") { t in
                t.primaryKey("id", .text)
                t.column("storedFile", .text).notNull().unique()
                t.column("kind", .text).notNull()
                t.column("name", .text).notNull()
                t.column("size", .integer).notNull()
                t.column("contentHash", .text).notNull()
                t.column("dateAdded", .datetime).notNull()
            }
        }
        return m
    }

    /// Runs `body` holding an exclusive flock on `path`.
    static func withLock<T>(_ path: String, _ body: () throws -> T) throws -> T {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CoreError.io(path: path, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            if errno != EINTR { throw CoreError.io(path: path, reason: String(cString: strerror(errno))) }
        }
        return try body()
    }

    // MARK: reading

    public func all() throws(CoreError) -> [Meditation] {
        try read { db in try Meditation.fetchAll(db) }
    }

    public func customSounds() throws(CoreError) -> [CustomSound] {
        try read { db in try CustomSound.fetchAll(db) }
    }

    func read<T: Sendable>(_ body: @Sendable (Database) throws -> T) throws(CoreError) -> T {
        do { return try pool.read(body) } catch {
            throw CoreError.io(path: databasePath, reason: "\(error)")
        }
    }

    func write<T: Sendable>(_ body: @Sendable (Database) throws -> T) throws(CoreError) -> T {
        do { return try pool.write(body) } catch let error as CoreError {
            throw error
        } catch {
            throw CoreError.io(path: databasePath, reason: "\(error)")
        }
    }

    /// Finds a meditation by UUID, unique UUID prefix, or exact name (case-insensitive).
    public func find(_ key: String) throws(CoreError) -> Meditation {
        let all = try all()
        let k = key.lowercased()
        if let exact = all.first(where: { $0.id == k }) { return exact }
        let byPrefix = k.count >= 4 ? all.filter { $0.id.hasPrefix(k) } : []
        if byPrefix.count == 1 { return byPrefix[0] }
        let byName = all.filter { $0.name.lowercased() == k }
        if byName.count == 1 { return byName[0] }
        if byPrefix.count > 1 || byName.count > 1 {
            let names = (byPrefix.isEmpty ? byName : byPrefix).map { "\($0.id.prefix(8)) \($0.name)" }
            throw CoreError.invalid("'\(key)' matches several meditations: \(names.joined(separator: ", ")); give more of the id")
        }
        throw CoreError.invalid("no meditation '\(key)' in the library (see `stillmoment list`)")
    }

    public func path(of m: Meditation) -> String { meditationsFolder + "/" + m.storedFile }

    public func update(_ m: Meditation) throws(CoreError) {
        try write { db in try m.update(db) }
    }

    public func savePosition(id: String, ms: Int64?) throws(CoreError) {
        try write { db in
            try db.execute(sql: "UPDATE meditation SET lastPosition = ? WHERE id = ?", arguments: [ms, id])
        }
    }

    /// Deletes the row, then the file (a crash in between leaves an orphan file, which
    /// the next open removes).
    public func delete(_ m: Meditation) throws(CoreError) {
        _ = try write { db in try m.delete(db) }
        if unlink(path(of: m)) != 0 && errno != ENOENT {
            throw CoreError.io(path: path(of: m), reason: String(cString: strerror(errno)))
        }
    }

    // MARK: consistency

    /// Files an import is writing are held with flock; a file that nobody holds and that
    /// no row names is what an interrupted import left behind.
    func recoverInterruptedImports() throws(CoreError) {
        for folder in [meditationsFolder, soundsFolder] {
            for name in Self.list(folder) {
                let path = folder + "/" + name
                if name.hasPrefix(".import-") {
                    if Self.isUnlocked(path) { unlink(path) }
                    continue
                }
                // Only what an import creates (<UUID>.mp3|m4a) is ours to clean up; any
                // other unlisted file is an orphan for `library verify` to report.
                guard Self.isImportName(name) else { continue }
                // Lock first, then look for the row: an import commits before it unlocks.
                let fd = open(path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { continue }
                defer { close(fd) }
                guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { continue }
                let known = try read { db in
                    try Int.fetchOne(db, sql: "SELECT (SELECT count(*) FROM meditation WHERE storedFile = ?) + (SELECT count(*) FROM customSound WHERE storedFile = ?)",
                                     arguments: [name, name]) ?? 0
                }
                if known == 0 { unlink(path) }
            }
        }
    }

    static func isImportName(_ name: String) -> Bool {
        let parts = name.split(separator: ".")
        guard parts.count == 2, ["mp3", "m4a"].contains(parts[1]) else { return false }
        return UUID(uuidString: String(parts[0])) != nil
    }

    static func isUnlocked(_ path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return flock(fd, LOCK_EX | LOCK_NB) == 0
    }

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

    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        public enum Kind: Sendable, Equatable { case missingFile, sizeMismatch, hashMismatch, orphanFile }
        public let kind: Kind
        public let file: String
        public let meditation: String?
        public var description: String {
            switch kind {
            case .missingFile: return "missing file \(file) for \(meditation ?? "?")"
            case .sizeMismatch: return "size differs for \(file) (\(meditation ?? "?"))"
            case .hashMismatch: return "content changed for \(file) (\(meditation ?? "?"))"
            case .orphanFile: return "orphan file \(file) (no catalog entry)"
            }
        }
    }

    /// Checks every row against its file (exists, size, hash) and finds orphan files.
    public func verify() throws(CoreError) -> [Problem] {
        var problems: [Problem] = []
        let rows = try all()
        var known = Set<String>()
        for m in rows {
            known.insert(m.storedFile)
            let p = path(of: m)
            var st = stat()
            guard stat(p, &st) == 0 else {
                problems.append(Problem(kind: .missingFile, file: m.storedFile, meditation: m.name))
                continue
            }
            if Int64(st.st_size) != m.size {
                problems.append(Problem(kind: .sizeMismatch, file: m.storedFile, meditation: m.name))
            } else if (try? ContentHash.of(file: p)) != m.contentHash {
                problems.append(Problem(kind: .hashMismatch, file: m.storedFile, meditation: m.name))
            }
        }
        let sounds = try customSounds()
        for s in sounds {
            known.insert(s.storedFile)
            if access(soundsFolder + "/" + s.storedFile, F_OK) != 0 {
                problems.append(Problem(kind: .missingFile, file: s.storedFile, meditation: s.name))
            }
        }
        for folder in [meditationsFolder, soundsFolder] {
            for name in Self.list(folder) where !name.hasPrefix(".") && !known.contains(name) {
                problems.append(Problem(kind: .orphanFile, file: name, meditation: nil))
            }
        }
        return problems
    }

    /// Removes rows whose file is gone and orphan files. Returns what was done, a line each.
    public func repair() throws(CoreError) -> [String] {
        var done: [String] = []
        for p in try verify() {
            switch p.kind {
            case .missingFile:
                let file = p.file
                _ = try write { db in
                    try db.execute(sql: "DELETE FROM meditation WHERE storedFile = ?", arguments: [file])
                    try db.execute(sql: "DELETE FROM customSound WHERE storedFile = ?", arguments: [file])
                }
                done.append("removed the entry for \(p.meditation ?? p.file) (its file \(p.file) is gone)")
            case .orphanFile:
                for folder in [meditationsFolder, soundsFolder] where unlink(folder + "/" + p.file) == 0 {
                    done.append("deleted orphan file \(p.file)")
                }
            case .sizeMismatch, .hashMismatch:
                done.append("left \(p.description): import the meditation again to replace it")
            }
        }
        return done
    }
}

/// XXH3-128 of a file's content, as hex.
public enum ContentHash {
    public static func of(file path: String) throws(CoreError) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CoreError.io(path: path, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        let hasher = Hasher128()
        var buf = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw CoreError.io(path: path, reason: String(cString: strerror(errno)))
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
