/// A meditation's file moving between nodes, by its content hash: the bytes are appended to
/// `.arriving-<hash>` in the store's `Meditations/` folder at the offset the receiver already
/// holds (so a transfer cut anywhere resumes where it stopped), never past the size the
/// record declares; once whole, the file is hashed, and only the content the record names
/// is adopted — linked to each arriving meditation of that content and cataloged in one
/// transaction, as an import lands. A file that is not what it claims is thrown away. The
/// sender reads from the stored copy of a meditation of that hash.
import FoundationEssentials
import Glibc
import GRDB

public enum SyncFiles {
    /// The bytes one request carries at most (both ways).
    public static let chunkBytes = 8 << 20

    static func partPath(_ hash: String, folders: SyncFolders) -> String {
        folders.meditations + "/.arriving-" + hash
    }

    /// Bytes of `hash` fetched so far (0: none).
    static func partSize(_ hash: String, folders: SyncFolders) -> Int64 {
        guard SyncFileFacts.isHash(hash) else { return 0 }
        var st = stat()
        guard lstat(partPath(hash, folders: folders), &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return 0 }
        return Int64(st.st_size)
    }

    /// What an append did.
    public enum Outcome: Sendable, Equatable {
        /// More is wanted, from this offset.
        case more(Int64)
        /// The file was whole and is adopted for these meditations.
        case adopted([String])
        /// Nothing here waits for this content (deleted meanwhile, or already here).
        case unwanted
    }

    /// A content this node waits for: a meditation's or a sound's whose file is not here.
    struct Waiting: Sendable {
        var hash: String
        var size: Int64
        /// Whether `sync files` lets this device fetch it.
        var fetched: Bool
    }

    /// What this node waits for (`limit`: as `sync files` says; nil: everything).
    static func waiting(_ db: Database, folders: SyncFolders, limit: Int64?) throws -> [Waiting] {
        let meditations = try SyncMeditations.arriving(db, folders: folders, limit: limit).map { Waiting(hash: $0.hash, size: $0.size, fetched: $0.fetched) }
        let sounds = try SyncSounds.arriving(db).map { s in Waiting(hash: s.hash, size: s.size, fetched: limit.map { s.size <= $0 } ?? true) }
        return meditations + sounds
    }

    /// The sizes the records waiting for `hash` declare (empty: none waits). Two records may
    /// declare two sizes for one hash (a peer that lies about one): the bytes are checked at
    /// each, and the file is adopted for the records whose size it has.
    static func declaredSizes(_ hash: String, _ store: LibraryStore) throws(SyncError) -> Set<Int64> {
        let folders = SyncFolders(store)
        do {
            return try store.read { db in Set(try waiting(db, folders: folders, limit: nil).filter { $0.hash == hash }.map(\.size)) }
        } catch { throw .store(error) }
    }

    /// Appends `bytes` at `offset` of the file of content `hash`; when that makes it as long
    /// as a record declares, verifies it and adopts it. An offset other than what is here
    /// already is answered with what is here (the sender goes on from there). No bytes at the
    /// whole length finish a file whose last append was cut before it was adopted.
    public static func append(_ hash: String, offset: Int64, bytes: [UInt8], store: LibraryStore) throws(SyncError) -> Outcome {
        guard SyncFileFacts.isHash(hash) else { throw .refused(both("not a content hash", "keine Inhaltsprüfsumme")) }
        let all = try declaredSizes(hash, store)
        guard let declared = all.max() else { return .unwanted }
        // Hashed at three lengths at most besides the longest (many records lying about one
        // hash's size cannot make a file be hashed again and again).
        let sizes = Set(all.sorted().prefix(3)).union([declared])
        let folders = SyncFolders(store)
        let path = partPath(hash, folders: folders)
        // Made by the first bytes only (a wrong offset leaves nothing behind).
        let fd = open(path, O_WRONLY | (offset == 0 ? O_CREAT : 0) | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd < 0 && errno == ENOENT { return .more(0) }
        guard fd >= 0 else { throw .store(.io(path: path, reason: .systemError)) }
        defer { close(fd) }
        // One writer at a time (two devices may send the same content).
        while flock(fd, LOCK_EX) != 0 { if errno != EINTR { throw .store(.io(path: path, reason: .systemError)) } }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_nlink == 1 else {
            throw .store(.io(path: path, reason: both("not a file of ours", "keine Datei von uns")))
        }
        let have = Int64(st.st_size)
        guard offset == have else { return .more(have) }
        guard have + Int64(bytes.count) <= declared else {
            // More than the record declares: the sender lies about the content.
            unlink(path)
            throw .refused(both("more bytes than the file has (\(declared)): thrown away",
                                "mehr Bytes, als die Datei hat (\(declared)): verworfen"))
        }
        if !bytes.isEmpty {
            // Room for the rest of the file and the store's reserve, before the first byte.
            if store.freeBytes() < (declared - have) + (64 << 20) {
                throw .store(.noSpace(path: path, home: store.home, needed: declared - have, free: store.freeBytes()))
            }
            var done = 0
            while done < bytes.count {
                let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress.map { $0 + done }, $0.count - done, off_t(have) + off_t(done)) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw .store(.io(path: path, reason: .systemError))
                }
                done += n
            }
        }
        let now = have + Int64(bytes.count)
        guard sizes.contains(now) else { return .more(now) }
        guard fsync(fd) == 0 else { throw .store(.io(path: path, reason: .systemError)) }
        let hash2: String
        do { hash2 = try ContentHash.of(file: path) } catch { throw .store(error) }
        guard hash2 == hash else {
            // Not it at this length: more may come for a longer record, else it is thrown away.
            if now < declared { return .more(now) }
            unlink(path)
            throw .refused(both("the file's content is not what its meditation names (hash \(hash2), not \(hash)): thrown away",
                                "der Inhalt der Datei ist nicht der, den ihre Meditation nennt (Prüfsumme \(hash2), nicht \(hash)): verworfen"))
        }
        return .adopted(try adopt(hash, size: now, path: path, store: store))
    }

    /// Links the whole, verified file to every meditation of its content that is still
    /// arriving and catalogs them, in one transaction; the part file goes.
    private static func adopt(_ hash: String, size: Int64, path: String, store: LibraryStore) throws(SyncError) -> [String] {
        let folders = SyncFolders(store)
        let adopted: [String]
        do {
            adopted = try store.write { db in
                var ids: [String] = []
                for a in try SyncMeditations.arriving(db, folders: folders, limit: nil) where a.hash == hash && a.size == size {
                    guard let fields = try SyncJournal.records(db, .meditation, ids: [a.id])[a.id],
                          let m = SyncMeditations.row(a.id, fields) else { continue }
                    let target = folders.meditations + "/" + m.storedFile
                    guard link(path, target) == 0 || errno == EEXIST else { throw CoreError.io(path: target, reason: .systemError) }
                    try m.insert(db)
                    ids.append(a.id)
                }
                // Sounds of this content (their ids listed by record).
                let before = Set(try SyncSounds.arriving(db).filter { $0.hash == hash && $0.size == size }.map(\.record))
                try SyncSounds.apply(db, folders: folders, extra: [hash: (path, size)])
                let still = Set(try SyncSounds.arriving(db).map(\.record))
                ids += before.subtracting(still).sorted()
                Importer.syncFolder(folders.meditations)
                Importer.syncFolder(folders.sounds)
                return ids
            }
        } catch {
            throw .store(error)
        }
        folders.afterCommit.run()
        unlink(path)
        return adopted
    }

    /// Up to `count` bytes of the file of content `hash` from `offset`, read from the stored
    /// copy of a meditation that has it (nil: not here).
    public static func read(_ hash: String, offset: Int64, count: Int, store: LibraryStore) throws(SyncError) -> (bytes: [UInt8], size: Int64)? {
        guard SyncFileFacts.isHash(hash), offset >= 0, count >= 0 else { return nil }
        // Every stored copy of that content: a meditation's, or an imported sound's.
        let copies: [(path: String, size: Int64)]
        do {
            let rows = try store.catalogRows()
            copies = rows.meditations.filter { $0.contentHash == hash }.map { (store.path(of: $0), $0.size) }
                + rows.sounds.filter { $0.contentHash == hash }.map { (store.soundsFolder + "/" + $0.storedFile, $0.size) }
        } catch { throw .store(error) }
        for (path, size) in copies {
            let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            var st = stat()
            guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, Int64(st.st_size) == size else { continue }
            let n = Int(max(0, min(Int64(min(count, chunkBytes)), size - offset)))
            var bytes = [UInt8](repeating: 0, count: n)
            var done = 0
            while done < n {
                let r = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress.map { $0 + done }, n - done, off_t(offset) + off_t(done)) }
                if r < 0 && errno == EINTR { continue }
                guard r > 0 else { break }
                done += r
            }
            guard done == n else { continue }
            return (bytes, size)
        }
        return nil
    }

    /// The contents this node wants (meditations and sounds arriving that `limit` lets it
    /// fetch), with what it holds of each.
    public static func wanted(store: LibraryStore, limit: Int64? = nil) throws(SyncError) -> [(hash: String, size: Int64, have: Int64)] {
        let folders = SyncFolders(store)
        let list: [Waiting]
        do { list = try store.read { db in try waiting(db, folders: folders, limit: limit) } } catch { throw .store(error) }
        var seen = Set<String>()
        var out: [(hash: String, size: Int64, have: Int64)] = []
        for a in list where a.fetched && seen.insert(a.hash).inserted { out.append((a.hash, a.size, partSize(a.hash, folders: folders))) }
        return out
    }

    /// Removes part files nothing waits for any more (their meditations deleted or here).
    public static func sweep(store: LibraryStore) {
        let folders = SyncFolders(store)
        guard let list = try? store.read({ db in try waiting(db, folders: folders, limit: nil) }) else { return }
        let awaited = Set(list.map(\.hash))
        for name in LibraryStore.list(folders.meditations) where name.hasPrefix(".arriving-") {
            let hash = String(name.dropFirst(".arriving-".count))
            if !awaited.contains(hash) { LibraryStore.removeIfUnlocked(folders.meditations + "/" + name) }
        }
    }
}
