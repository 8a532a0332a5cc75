/// The store against a damaged, emptied, lost or restored catalog: nothing stored is ever
/// deleted, bad rows are reported and rebuilt, and no row can point outside the store.
import Foundation
import Glibc
import GRDB
import Synchronization
import Testing
@testable import StillMomentCore

@Suite("Store damage and recovery")
struct StoreDamageTests {
    typealias L = LibraryTests

    /// Imports the three MP3/M4A fixtures and returns the store and the rows.
    static func library(_ home: LibraryTempHome) throws -> (LibraryStore, [Meditation]) {
        let (store, importer) = try L.fresh(home)
        var rows: [Meditation] = []
        for f in ["vbr.mp3", "editlist.m4a", "cbr.mp3"] {
            rows.append(try #require(L.imported(try importer.importFile(L.fixture(f)))))
        }
        return (store, rows)
    }

    /// Runs SQL on the catalog directly, as a hand edit or a damaged disk would.
    static func sql(_ store: LibraryStore, _ statement: String) throws {
        let queue = try DatabaseQueue(path: store.databasePath)
        try queue.write { db in try db.execute(sql: statement) }
    }

    @Test("an emptied catalog (: > library.sqlite) is rebuilt from the stored files; none is deleted")
    func emptiedCatalog() throws {
        let home = LibraryTempHome()
        let (store, rows) = try Self.library(home)
        let files = L.listing(store.meditationsFolder)
        for suffix in ["", "-wal", "-shm"] { unlink(store.databasePath + suffix) }
        #expect(creat(store.databasePath, 0o600) >= 0)
        let reopened = try LibraryStore(home: home.path)
        #expect(L.listing(reopened.meditationsFolder) == files)
        #expect(try reopened.all().map(\.id).sorted() == rows.map(\.id).sorted())
        #expect(reopened.notes.first?.contains("rebuilt") == true)
        #expect(try reopened.verify() == [])
        // Tags name them again; the hash and length are measured anew.
        let vbr = try #require(try reopened.all().first { $0.id == rows[0].id })
        #expect(vbr.name == rows[0].name && vbr.contentHash == rows[0].contentHash && vbr.durationFrames == rows[0].durationFrames)
    }

    @Test("a catalog that is not a database at all is kept aside (never deleted) and rebuilt from the files")
    func garbageCatalog() throws {
        let home = LibraryTempHome()
        let (store, rows) = try Self.library(home)
        for suffix in ["-wal", "-shm"] { unlink(store.databasePath + suffix) }
        let garbage = Data((0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 2654435761 >> 7) })
        try garbage.write(to: URL(fileURLWithPath: store.databasePath))
        let reopened = try LibraryStore(home: home.path)
        #expect(try reopened.all().map(\.id).sorted() == rows.map(\.id).sorted())
        let aside = L.listing(home.path).filter { $0.hasPrefix("library.sqlite.damaged-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }
        #expect(aside.count == 1)
        #expect(try L.bytes(home.path + "/" + (aside.first ?? "")) == garbage, "kept as it was")
        #expect(reopened.notes.first?.contains("not a database") == true)
    }

    @Test("a deleted catalog beside a non-empty store is rebuilt, not a new library")
    func deletedCatalog() throws {
        let home = LibraryTempHome()
        let (store, rows) = try Self.library(home)
        for suffix in ["", "-wal", "-shm"] { unlink(store.databasePath + suffix) }
        let reopened = try LibraryStore(home: home.path)
        #expect(try reopened.all().count == rows.count)
        #expect(L.listing(reopened.meditationsFolder).count == rows.count)
    }

    @Test("a catalog restored from an older backup: newer files reported, adopted by repair, none deleted")
    func restoredBackup() throws {
        let home = LibraryTempHome()
        let (store, importer) = try L.fresh(home)
        let first = try #require(L.imported(try importer.importFile(L.fixture("vbr.mp3"))))
        let backup = home.path + "/backup.sqlite"
        let queue = try DatabaseQueue(path: store.databasePath)
        try queue.writeWithoutTransaction { db in try db.execute(sql: "VACUUM INTO '\(backup)'") }
        try queue.close()
        let later = try #require(L.imported(try importer.importFile(L.fixture("editlist.m4a"))))
        for suffix in ["", "-wal", "-shm"] { unlink(store.databasePath + suffix) }
        #expect(rename(backup, store.databasePath) == 0)

        let restored = try LibraryStore(home: home.path)
        #expect(try restored.all().map(\.id) == [first.id])
        #expect(L.exists(restored.path(of: later)), "opening never deletes a stored file")
        let problems = try restored.verify()
        #expect(problems == [LibraryStore.Problem(kind: .orphanFile, file: later.storedFile, meditation: nil)])
        let done = try restored.repair()
        #expect(done.count == 1 && done[0].hasPrefix("adopted"), "\(done)")
        #expect(try restored.verify() == [])
        #expect(try restored.all().map(\.id).sorted() == [first.id, later.id].sorted())
    }

    @Test("damaged rows (unreadable date, a path outside the store, impossible numbers) are skipped, reported and rebuilt")
    func damagedRows() throws {
        let home = LibraryTempHome()
        let (store, rows) = try Self.library(home)
        try Self.sql(store, "UPDATE meditation SET dateAdded = 'not a date' WHERE id = '\(rows[0].id)'")
        try Self.sql(store, "UPDATE meditation SET storedFile = '../../../../etc/passwd' WHERE id = '\(rows[1].id)'")
        try Self.sql(store, "UPDATE meditation SET sampleRate = 0, durationFrames = 9223372036854775000 WHERE id = '\(rows[2].id)'")

        // Reading works, with the good rows only; nothing traps on the bad numbers.
        #expect(try store.all().isEmpty)
        let catalog = try store.catalogRows()
        #expect(catalog.damaged.count == 3)
        #expect(throws: CoreError.self) { try store.find(rows[1].id) }
        let problems = try store.verify()
        #expect(problems.filter { $0.kind == .damagedRow }.count == 3)
        // The file the traversal row names is its own, unchanged; the row never resolves it.
        #expect(L.exists(store.meditationsFolder + "/" + rows[1].storedFile))

        let done = try store.repair()
        #expect(done.filter { $0.hasPrefix("removed the damaged") }.count == 3, "\(done)")
        #expect(done.filter { $0.hasPrefix("adopted") }.count == 3, "\(done)")
        #expect(try store.verify() == [])
        #expect(try store.all().map(\.id).sorted() == rows.map(\.id).sorted())
    }

    @Test("a row's huge duration or zero rate never traps its readers")
    func impossibleNumbers() {
        var m = Meditation(id: "x", storedFile: "x.mp3", originalName: "x", durationFrames: .max, sampleRate: 0,
                           teacher: "", name: "x", album: nil, dateAdded: Date(), trimStart: nil, trimEnd: nil,
                           startGong: nil, endGong: nil, size: 0, contentHash: "", loudnessGain: 0, lastPosition: nil)
        #expect(m.durationMilliseconds == 0 && m.duration == 0 && m.damage != nil)
        m.sampleRate = 1
        #expect(m.durationMilliseconds > 0 && m.damage != nil)
    }

    @Test("importing the same content again replaces a damaged or missing copy")
    func replacesDamagedCopy() throws {
        let home = LibraryTempHome()
        let (store, importer) = try L.fresh(home)
        let m = try #require(L.imported(try importer.importFile(L.fixture("vbr.mp3"))))
        var content = try L.bytes(store.path(of: m))
        content[content.count / 2] ^= 0xFF
        try content.write(to: URL(fileURLWithPath: store.path(of: m)))
        #expect(try store.verify().map(\.kind) == [.hashMismatch])
        guard case .replacedDamagedCopy(let again) = try importer.importFile(L.fixture("vbr.mp3")) else {
            Issue.record("the damaged copy was not replaced")
            return
        }
        #expect(again.id == m.id)
        #expect(try store.verify() == [])
        #expect(try L.bytes(store.path(of: m)) == (try L.bytes(L.fixture("vbr.mp3"))))

        #expect(unlink(store.path(of: m)) == 0)
        guard case .replacedDamagedCopy = try importer.importFile(L.fixture("vbr.mp3")) else {
            Issue.record("the missing copy was not put back")
            return
        }
        #expect(try store.verify() == [])
        #expect(L.listing(store.meditationsFolder) == [m.storedFile])
    }

    @Test("the catalog and its -wal and -shm files are private (0600)")
    func privateCatalog() throws {
        let home = LibraryTempHome()
        let (store, _) = try Self.library(home)
        for suffix in ["", "-wal", "-shm"] {
            var st = stat()
            guard stat(store.databasePath + suffix, &st) == 0 else { continue }
            #expect(st.st_mode & 0o777 == 0o600, "library.sqlite\(suffix) is \(String(st.st_mode & 0o777, radix: 8))")
        }
        // An old store's world-readable catalog is made private when opened.
        chmod(store.databasePath, 0o644)
        _ = try LibraryStore(home: home.path)
        var st = stat()
        #expect(stat(store.databasePath, &st) == 0 && st.st_mode & 0o777 == 0o600)
    }

    @Test("repair racing imports never loses one: every import that succeeds has its file and row")
    func repairRacingImports() throws {
        let home = LibraryTempHome()
        let (store, _) = try L.fresh(home)
        // Twenty distinct small files: the fixture with a different trailing byte each.
        let base = try L.bytes(L.fixture("cbr.mp3"))
        var sources: [String] = []
        for i in 0..<20 {
            let p = home.path + "/src-\(i).mp3"
            try (base + Data([UInt8(i)])).write(to: URL(fileURLWithPath: p))
            sources.append(p)
        }
        let files = sources
        let results = Mutex<[String]>([])
        let repairing = Atomic<Bool>(true)
        let repairer = Thread {
            let own = try? LibraryStore(home: home.path)
            while repairing.load(ordering: .relaxed) { _ = try? own?.repair() }
        }
        repairer.start()
        L.together(4) { k in
            guard let own = try? LibraryStore(home: home.path) else { return }
            let importer = Importer(store: own)
            for i in stride(from: k, to: 20, by: 4) {
                if case .imported(let m)? = try? importer.importFile(files[i]) {
                    results.withLock { $0.append(m.id) }
                }
            }
        }
        repairing.store(false, ordering: .relaxed)
        _ = try store.repair()
        let imported = results.withLock { $0 }
        #expect(imported.count == 20)
        let all = try store.all()
        for id in imported {
            let m = try #require(all.first { $0.id == id }, "the row of \(id) is gone")
            #expect(store.copyIsIntact(m), "the file of \(id) is gone or damaged")
        }
        #expect(try store.verify() == [])
    }
}
