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

    /// The arriving meditations of `hash` and the size they declare (nil: none waits).
    static func wanted(_ hash: String, _ store: LibraryStore) throws(SyncError) -> (size: Int64, ids: [String])? {
        let folders = SyncFolders(store)
        let list: [ArrivingMeditation]
        do { list = try store.read { db in try SyncMeditations.arriving(db, folders: folders, limit: nil) } } catch { throw .store(error) }
        let ids = list.filter { $0.hash == hash }
        guard let first = ids.first else { return nil }
        return (first.size, ids.map(\.id))
    }

    /// Appends `bytes` at `offset` of the file of content `hash`; when that makes it whole,
    /// verifies and adopts it. An offset other than what is here already is refused with
    /// what is here (the sender goes on from there).
    public static func append(_ hash: String, offset: Int64, bytes: [UInt8], store: LibraryStore) throws(SyncError) -> Outcome {
        guard SyncFileFacts.isHash(hash) else { throw .refused(both("not a content hash", "keine Inhaltsprüfsumme")) }
        guard let wanted = try wanted(hash, store) else { return .unwanted }
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
        guard have + Int64(bytes.count) <= wanted.size else {
            // More than the record declares: the sender lies about the content.
            unlink(path)
            throw .refused(both("more bytes than the meditation's file has (\(wanted.size)): thrown away",
                                "mehr Bytes, als die Datei der Meditation hat (\(wanted.size)): verworfen"))
        }
        if !bytes.isEmpty {
            if store.freeBytes() < Int64(bytes.count) + (16 << 20) {
                throw .store(.noSpace(path: path, home: store.home, needed: wanted.size - have, free: store.freeBytes()))
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
        guard now == wanted.size else { return .more(now) }
        guard fsync(fd) == 0 else { throw .store(.io(path: path, reason: .systemError)) }
        let hash2: String
        do { hash2 = try ContentHash.of(file: path) } catch { throw .store(error) }
        guard hash2 == hash else {
            unlink(path)
            throw .refused(both("the file's content is not what its meditation names (hash \(hash2), not \(hash)): thrown away",
                                "der Inhalt der Datei ist nicht der, den ihre Meditation nennt (Prüfsumme \(hash2), nicht \(hash)): verworfen"))
        }
        return .adopted(try adopt(hash, path: path, store: store))
    }

    /// Links the whole, verified file to every meditation of its content that is still
    /// arriving and catalogs them, in one transaction; the part file goes.
    private static func adopt(_ hash: String, path: String, store: LibraryStore) throws(SyncError) -> [String] {
        let folders = SyncFolders(store)
        let adopted: [String]
        do {
            adopted = try store.write { db in
                var ids: [String] = []
                for a in try SyncMeditations.arriving(db, folders: folders, limit: nil) where a.hash == hash {
                    guard let fields = try SyncJournal.records(db, .meditation, ids: [a.id])[a.id],
                          let m = SyncMeditations.row(a.id, fields) else { continue }
                    let target = folders.meditations + "/" + m.storedFile
                    guard link(path, target) == 0 || errno == EEXIST else { throw CoreError.io(path: target, reason: .systemError) }
                    try m.insert(db)
                    ids.append(a.id)
                }
                Importer.syncFolder(folders.meditations)
                return ids
            }
        } catch {
            throw .store(error)
        }
        unlink(path)
        return adopted
    }

    /// Up to `count` bytes of the file of content `hash` from `offset`, read from the stored
    /// copy of a meditation that has it (nil: not here).
    public static func read(_ hash: String, offset: Int64, count: Int, store: LibraryStore) throws(SyncError) -> (bytes: [UInt8], size: Int64)? {
        guard SyncFileFacts.isHash(hash), offset >= 0, count >= 0 else { return nil }
        let rows: [Meditation]
        do { rows = try store.all().filter { $0.contentHash == hash } } catch { throw .store(error) }
        for m in rows {
            let fd = open(store.path(of: m), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            var st = stat()
            guard fstat(fd, &st) == 0, Int64(st.st_size) == m.size else { continue }
            let n = Int(max(0, min(Int64(min(count, chunkBytes)), m.size - offset)))
            var bytes = [UInt8](repeating: 0, count: n)
            var done = 0
            while done < n {
                let r = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress.map { $0 + done }, n - done, off_t(offset) + off_t(done)) }
                if r < 0 && errno == EINTR { continue }
                guard r > 0 else { break }
                done += r
            }
            guard done == n else { continue }
            return (bytes, m.size)
        }
        return nil
    }

    /// The contents this node wants (meditations arriving that `limit` lets it fetch), with
    /// what it holds of each.
    public static func wanted(store: LibraryStore, limit: Int64? = nil) throws(SyncError) -> [(hash: String, size: Int64, have: Int64)] {
        let folders = SyncFolders(store)
        let list: [ArrivingMeditation]
        do { list = try store.read { db in try SyncMeditations.arriving(db, folders: folders, limit: limit) } } catch { throw .store(error) }
        var seen = Set<String>()
        var out: [(hash: String, size: Int64, have: Int64)] = []
        for a in list where a.fetched && seen.insert(a.hash).inserted { out.append((a.hash, a.size, a.have)) }
        return out
    }

    /// Removes part files nothing waits for any more (their meditations deleted or here).
    public static func sweep(store: LibraryStore) {
        let folders = SyncFolders(store)
        guard let list = try? store.read({ db in try SyncMeditations.arriving(db, folders: folders, limit: nil) }) else { return }
        let waiting = Set(list.map(\.hash))
        for name in LibraryStore.list(folders.meditations) where name.hasPrefix(".arriving-") {
            let hash = String(name.dropFirst(".arriving-".count))
            if !waiting.contains(hash) { LibraryStore.removeIfUnlocked(folders.meditations + "/" + name) }
        }
    }
}
