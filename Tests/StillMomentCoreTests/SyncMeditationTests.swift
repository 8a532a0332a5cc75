/// Guided meditations between a hub and its devices, on real catalogs and real files in one
/// process: the row first, then the file by its hash in chunks (resumed where it stopped,
/// verified, adopted), edits both ways, a delete (the file kept in Lost+Found), one content
/// imported on two devices (two meditations, one file), and a peer whose file lies.
import Foundation
import Glibc
import GRDB
import Testing
@testable import StillMomentCore

@Suite("Sync of meditations")
struct SyncMeditationTests {
    static let fixture = LibraryTests.fixture("cbr.mp3")

    /// Imports `path` into `r`.
    static func importFile(_ r: SyncReplica, _ path: String = fixture, name: String? = nil) throws -> Meditation {
        try #require(LibraryTests.imported(try Importer(store: r.store).importFile(path, options: .init(name: name))))
    }

    /// Moves every file `to` waits for from `from`, `chunk` bytes a request, as SyncPeer does
    /// over HTTP (stopping after `stopAfter` requests, as a cycle cut off).
    @discardableResult
    static func moveFiles(from: SyncReplica, to: SyncReplica, chunk: Int = SyncFiles.chunkBytes, stopAfter: Int = .max) throws -> [String] {
        var adopted: [String] = []
        var requests = 0
        for w in try SyncFiles.wanted(store: to.store) {
            var offset = w.have
            while offset < w.size {
                guard requests < stopAfter else { return adopted }
                requests += 1
                guard let (bytes, _) = try SyncFiles.read(w.hash, offset: offset, count: chunk, store: from.store), !bytes.isEmpty else { break }
                switch try SyncFiles.append(w.hash, offset: offset, bytes: bytes, store: to.store) {
                case .more(let next): offset = next
                case .adopted(let ids): adopted += ids; offset = w.size
                case .unwanted: offset = w.size
                }
            }
        }
        return adopted
    }

    static func names(_ r: SyncReplica) throws -> [String] {
        try r.store.all().map { "\($0.id) \($0.name) \($0.teacher) \($0.trimStart ?? -1)-\($0.trimEnd ?? -1)" }.sorted()
    }

    @Test("a meditation imported on one device arrives on another: the row at once, the file after it, resumed where a cut stopped it")
    func arrives() throws {
        let hub = try SyncReplica(), a = try SyncReplica(), b = try SyncReplica()
        let m = try Self.importFile(a, name: "Body scan")
        try a.cycle(with: hub)
        // The hub has the row, not the file: it is arriving there, and not playable.
        #expect(try hub.store.all().isEmpty)
        let waiting = try hub.sync.arriving()
        #expect(waiting.map(\.id) == [m.id] && waiting.first?.have == 0 && waiting.first?.fetched == true)
        #expect(throws: CoreError.self) { try hub.store.find("Body scan") }
        // The file goes up in small chunks, cut after three of them, then resumed.
        try Self.moveFiles(from: a, to: hub, chunk: 4096, stopAfter: 3)
        #expect(try hub.sync.arriving().first?.have == 3 * 4096)
        #expect(try Self.moveFiles(from: a, to: hub, chunk: 4096) == [m.id])
        let there = try hub.store.find("Body scan")
        #expect(there.id == m.id && there.contentHash == m.contentHash && hub.store.copyIsIntact(there))
        #expect(try hub.sync.arriving().isEmpty)
        // The part file is gone once adopted.
        #expect(LibraryStore.list(hub.store.meditationsFolder).filter { $0.hasPrefix(".arriving-") }.isEmpty)
        // A second device: the row with its cycle, the file from the hub.
        try b.cycle(with: hub, device: 2)
        #expect(try b.sync.arriving().map(\.id) == [m.id])
        #expect(try Self.moveFiles(from: hub, to: b) == [m.id])
        #expect(try Self.names(b) == Self.names(a))
        #expect(try b.store.verify().isEmpty)
    }

    @Test("edits on two devices both stay (per field); an edit and a delete: the later wins; a delete keeps the file in Lost+Found")
    func editsAndDeletes() throws {
        let hub = try SyncReplica(), a = try SyncReplica(), b = try SyncReplica()
        let m = try Self.importFile(a, name: "Metta")
        try a.cycle(with: hub)
        try Self.moveFiles(from: a, to: hub)
        try b.cycle(with: hub, device: 2)
        try Self.moveFiles(from: hub, to: b)
        // A renames; B sets the teacher and a trim: both stay everywhere.
        try LibraryService(store: a.store).edit(m.id, MeditationEdit(name: "Metta (long)"))
        SyncTests.nextMillisecond()
        try LibraryService(store: b.store).edit(m.id, MeditationEdit(teacher: "Ajahn", trimStart: .set(200)))
        for _ in 0..<2 {
            try a.cycle(with: hub)
            try b.cycle(with: hub, device: 2)
        }
        #expect(try Self.names(a) == ["\(m.id) Metta (long) Ajahn 200--1"])
        #expect(try Self.names(b) == Self.names(a) && Self.names(hub) == Self.names(a))
        // B deletes; A edits it later: the edit wins and brings it back on B (file fetched again).
        try b.store.delete(try b.store.find(m.id))
        try b.cycle(with: hub, device: 2)
        #expect(try hub.store.all().isEmpty)
        let kept = LibraryStore.list(hub.store.lostAndFound)
        #expect(kept.count == 1 && kept[0].hasSuffix(".mp3"), "the hub keeps the deleted meditation's file in Lost+Found")
        SyncTests.nextMillisecond()
        try LibraryService(store: a.store).edit(m.id, MeditationEdit(name: "Metta again"))
        try a.cycle(with: hub)
        #expect(try hub.sync.arriving().map(\.name) == ["Metta again"], "brought back, its file wanted again")
        try Self.moveFiles(from: a, to: hub)
        try b.cycle(with: hub, device: 2)
        try Self.moveFiles(from: hub, to: b)
        #expect(try Self.names(b).first?.contains("Metta again") == true)
        #expect(try Self.names(b) == Self.names(a))
        // A delete that is newer than every edit takes it away everywhere.
        SyncTests.nextMillisecond()
        try a.store.delete(try a.store.find(m.id))
        try a.cycle(with: hub)
        try b.cycle(with: hub, device: 2)
        #expect(try a.store.all().isEmpty && b.store.all().isEmpty && hub.store.all().isEmpty)
        #expect(try b.sync.arriving().isEmpty && b.store.verify().isEmpty)
    }

    @Test("the same content imported on two devices is two meditations, sharing one file")
    func sameContentTwice() throws {
        let hub = try SyncReplica(), a = try SyncReplica(), b = try SyncReplica()
        let ma = try Self.importFile(a, name: "Breath")
        let mb = try Self.importFile(b, name: "Breath")
        #expect(ma.id != mb.id && ma.contentHash == mb.contentHash)
        try a.cycle(with: hub)
        try Self.moveFiles(from: a, to: hub)
        try b.cycle(with: hub, device: 2)
        // The hub has the content already: B's meditation is there at once, no transfer.
        #expect(try hub.sync.arriving().isEmpty)
        try a.cycle(with: hub)
        #expect(try a.sync.arriving().isEmpty, "A has the content too: linked, not fetched")
        for r in [hub, a, b] {
            let all = try r.store.all()
            #expect(Set(all.map(\.id)) == [ma.id, mb.id])
            #expect(try r.store.verify().isEmpty)
            var s1 = stat(), s2 = stat()
            #expect(stat(r.store.path(of: all[0]), &s1) == 0 && stat(r.store.path(of: all[1]), &s2) == 0 && s1.st_ino == s2.st_ino,
                    "one file under two names")
        }
        // Asked by name, the two are ambiguous (nothing picked behind the user's back).
        #expect(throws: CoreError.self) { try a.store.find("Breath") }
        // Deleting one leaves the other playable.
        try a.store.delete(try a.store.find(ma.id))
        try a.cycle(with: hub)
        try b.cycle(with: hub, device: 2)
        #expect(try b.store.all().map(\.id) == [mb.id] && b.store.copyIsIntact(try b.store.find(mb.id)))
    }

    @Test("a file whose bytes are not its meditation's content, or run past its size, is thrown away; a hostile row is refused")
    func lyingFiles() throws {
        let hub = try SyncReplica(), a = try SyncReplica()
        let m = try Self.importFile(a)
        try a.cycle(with: hub)
        let size = Int(m.size)
        // Other bytes of the declared size: refused when whole, nothing adopted, the part gone.
        let junk = [UInt8](repeating: 0x55, count: size)
        #expect(throws: SyncError.self) { try SyncFiles.append(m.contentHash, offset: 0, bytes: junk, store: hub.store) }
        #expect(try hub.store.all().isEmpty && hub.sync.arriving().first?.have == 0)
        // More bytes than declared.
        #expect(throws: SyncError.self) { try SyncFiles.append(m.contentHash, offset: 0, bytes: junk + [1, 2, 3], store: hub.store) }
        // A wrong offset is answered with what is here.
        #expect(try SyncFiles.append(m.contentHash, offset: 100, bytes: [1], store: hub.store) == .more(0))
        // Content nothing waits for.
        #expect(try SyncFiles.append(String(repeating: "0", count: 32), offset: 0, bytes: [1], store: hub.store) == .unwanted)
        // The true bytes land.
        #expect(try Self.moveFiles(from: a, to: hub) == [m.id])
        // Hostile rows: a path as the extension, a size that lies about being a file, names.
        let stamp = try #require(HybridTimestamp(milliseconds: SyncJournal.wallMilliseconds(), counter: 0, node: SyncTests.nodeA))
        let id = "cccccccc-0000-4000-8000-000000000003"
        var facts = SyncFileFacts(m)
        let hostile: [(String, String)] = [
            ("file", { facts.ext = "../../x"; return JSON(encoding: facts).line }()),
            ("file", { facts = SyncFileFacts(m); facts.size = -1; return JSON(encoding: facts).line }()),
            ("file", { facts = SyncFileFacts(m); facts.size = 1 << 40; return JSON(encoding: facts).line }()),
            ("file", { facts = SyncFileFacts(m); facts.hash = "../" + String(repeating: "a", count: 29); return JSON(encoding: facts).line }()),
            ("file", { facts = SyncFileFacts(m); facts.rate = 1; return JSON(encoding: facts).line }()),
            ("file", { facts = SyncFileFacts(m); facts.original = "a\u{1b}[2J"; return JSON(encoding: facts).line }()),
            ("name", JSON.string("").line), ("name", JSON.string(String(repeating: "x", count: 201)).line),
            ("teacher", "42"), ("trimStart", "-5"), ("trimEnd", "1e300"), ("startGong", JSON.string("../gong").line),
            ("size", "1"),
        ]
        for (field, value) in hostile {
            let c = SyncChange(kind: .meditation, id: id, field: field, value: value, stamp: stamp)
            #expect(throws: SyncError.self, "\(field) \(value)") { try hub.sync.receive([c]) }
        }
        #expect(try hub.store.all().map(\.id) == [m.id] && hub.sync.arriving().isEmpty)
    }

    @Test("a device keeps rows only, or files up to a size (`sync files`)")
    func filePolicy() throws {
        let hub = try SyncReplica(), a = try SyncReplica(), b = try SyncReplica()
        let m = try Self.importFile(a)
        try a.cycle(with: hub)
        try Self.moveFiles(from: a, to: hub)
        try b.sync.setFilePolicy(.none)
        try b.cycle(with: hub, device: 2)
        #expect(try b.sync.arriving().map(\.fetched) == [false])
        #expect(try SyncFiles.wanted(store: b.store, limit: b.sync.filePolicy().limit).isEmpty)
        try b.sync.setFilePolicy(.under(m.size - 1))
        #expect(try b.sync.arriving().map(\.fetched) == [false])
        try b.sync.setFilePolicy(.under(m.size))
        #expect(try b.sync.arriving().map(\.fetched) == [true])
        #expect(try b.sync.filePolicy() == .under(m.size))
    }

    @Test("the migration of a catalog from before keeps every meditation and its seek index, and records them for sync")
    func migration() throws {
        // A meditation as an import made it, put into a catalog at v16 with its file.
        let source = try SyncReplica()
        let m = try Self.importFile(source)
        let index = try source.store.read { db -> (Int64, Data)? in
            guard let row = try Row.fetchOne(db, sql: "SELECT step, offsets FROM seekIndex") else { return nil }
            return (row["step"], row["offsets"])
        }
        let (step, offsets) = try #require(index)
        let home = LibraryTempHome()
        try Paths.makeFolder(home.path + "/Meditations")
        #expect(link(source.store.path(of: m), home.path + "/Meditations/" + m.storedFile) == 0)
        do {
            let old = try DatabaseQueue(path: home.path + "/library.sqlite")
            try LibraryStore.migrator(extensions: []).migrate(old, upTo: "v16-sync-peers")
            try old.write { db in
                try m.insert(db)
                try db.execute(sql: "INSERT INTO seekIndex (meditationID, step, offsets) VALUES (?, ?, ?)", arguments: [m.id, step, offsets])
                #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM syncField WHERE kind = 'meditation'") == 0)
            }
        }
        let store = try LibraryStore(home: home.path)
        #expect(try store.all() == [m])
        #expect(try store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM seekIndex WHERE meditationID = ?", arguments: [m.id]) } == 1)
        let fields = try store.read { db in try SyncJournal.records(db, .meditation)[m.id] }
        #expect(fields?.keys.sorted() == (["file"] + SyncMeditations.editFields).sorted())
        // The content hash is not unique any more; its lookups still use an index.
        let plan = try store.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN SELECT * FROM meditation WHERE contentHash = ?", arguments: ["x"]).map { $0["detail"] as String? ?? "" }.joined()
        }
        #expect(plan.contains("meditationContentHash"))
        #expect(try store.verify().isEmpty)
    }
    // MARK: the review's cases, and imported sounds

    @Test("a file whole but cut before it was adopted is finished by an empty append; a record that lies about a real hash's size holds up no one")
    func finishAndLyingSize() throws {
        let hub = try SyncReplica(), a = try SyncReplica()
        let m = try Self.importFile(a, name: "Walk")
        try a.cycle(with: hub)
        // All the bytes written, the adoption cut: the part is whole and nothing waits on a byte.
        let bytes = try #require(try SyncFiles.read(m.contentHash, offset: 0, count: Int(m.size), store: a.store)).bytes
        let part = hub.store.meditationsFolder + "/.arriving-" + m.contentHash
        #expect(FileManager.default.createFile(atPath: part, contents: Data(bytes), attributes: [.posixPermissions: 0o600]))
        #expect(try SyncFiles.wanted(store: hub.store).map(\.have) == [m.size])
        #expect(try SyncFiles.append(m.contentHash, offset: m.size, bytes: [], store: hub.store) == .adopted([m.id]))
        #expect(try hub.store.find("Walk").id == m.id)
        // A second record of the same hash that declares another size (a lying peer) does not
        // stop the true one from landing on another replica.
        let b = try SyncReplica()
        let stamp = try #require(HybridTimestamp(milliseconds: SyncJournal.wallMilliseconds() - 60_000, counter: 0, node: SyncTests.nodeB))
        var facts = SyncFileFacts(m)
        facts.size = m.size + 100
        let liar = "dddddddd-0000-4000-8000-000000000004"
        try b.sync.receive([SyncChange(kind: .meditation, id: liar, field: "file", value: JSON(encoding: facts).line, stamp: stamp),
                            SyncChange(kind: .meditation, id: liar, field: "name", value: JSON.string("AAA").line, stamp: stamp)])
        try b.cycle(with: hub, device: 2)
        #expect(try Self.moveFiles(from: hub, to: b) == [m.id])
        #expect(try b.store.all().map(\.id) == [m.id])
        #expect(try b.sync.arriving().map(\.id) == [liar], "the liar's record waits for content no one has")
    }

    @Test("a peer's loudness claim plays at most +24 dB")
    func loudnessClaim() throws {
        let hub = try SyncReplica(), a = try SyncReplica()
        let m = try Self.importFile(a)
        var facts = SyncFileFacts(m)
        facts.gain = 99
        let stamp = try #require(HybridTimestamp(milliseconds: SyncJournal.wallMilliseconds(), counter: 0, node: SyncTests.nodeB))
        let id = "eeeeeeee-0000-4000-8000-000000000005"
        try hub.sync.receive([SyncChange(kind: .meditation, id: id, field: "file", value: JSON(encoding: facts).line, stamp: stamp)])
        try Self.moveFiles(from: a, to: hub)
        #expect(try hub.store.find(id).loudnessGain == 24)
    }

    static func importSound(_ r: SyncReplica, _ name: String, file: String = fixture, kind: Sound.Kind = .gong) throws -> CustomSound {
        try Importer(store: r.store).importSound(file, kind: kind, name: name, catalog: try SoundCatalog.withCustomSounds(store: r.store))
    }

    @Test("an imported sound reaches every device with its file; two sounds of one id show as id and id-2 everywhere; a bundled id is never taken")
    func sounds() throws {
        let hub = try SyncReplica(), a = try SyncReplica(), b = try SyncReplica()
        _ = try Self.importSound(a, "My Bell")
        SyncTests.nextMillisecond()
        // B imports another content under the same name (the edit-list M4A fixture).
        _ = try Self.importSound(b, "My Bell", file: LibraryTests.fixture("editlist.m4a"), kind: .ambience)
        try a.cycle(with: hub)
        try Self.moveFiles(from: a, to: hub)
        try b.cycle(with: hub, device: 2)
        try Self.moveFiles(from: b, to: hub)
        try a.cycle(with: hub)
        try Self.moveFiles(from: hub, to: a)
        try b.cycle(with: hub, device: 2)
        try Self.moveFiles(from: hub, to: b)
        func view(_ r: SyncReplica) throws -> [String] {
            try r.store.customSounds().map { "\($0.id) \($0.kind) \($0.contentHash)" }.sorted()
        }
        let shown = try view(hub)
        #expect(shown.count == 2 && shown[0].hasPrefix("my-bell gong") && shown[1].hasPrefix("my-bell-2 ambience"), "\(shown)")
        #expect(try view(a) == shown && view(b) == shown)
        for r in [hub, a, b] {
            #expect(try r.store.verify().isEmpty)
            let catalog = try SoundCatalog.withCustomSounds(store: r.store)
            #expect(try catalog.gong("my-bell").id == "my-bell")
        }
        // A peer's sound named like a bundled one is shown under another id.
        let stamp = try #require(HybridTimestamp(milliseconds: SyncJournal.wallMilliseconds(), counter: 0, node: SyncTests.nodeB))
        let bell = try a.store.customSounds().first { $0.id == "my-bell" }
        let facts = SyncSoundFacts(id: "temple-bell", kind: "gong", name: "Temple Bell", hash: try #require(bell).contentHash,
                                   size: try #require(bell).size, ext: "mp3", frames: nil, added: 0)
        try a.sync.receive([SyncChange(kind: .sound, id: "ffffffff-0000-4000-8000-000000000006", field: "sound",
                                       value: JSON(encoding: facts).line, stamp: stamp)])
        #expect(try a.store.customSounds().map(\.id).sorted() == ["my-bell", "my-bell-2", "temple-bell-2"])
        // Hostile sounds: an id with a path, a size that lies about its length, a kind of ours not.
        for bad in [SyncSoundFacts(id: "../x", kind: "gong", name: "x", hash: facts.hash, size: 10, ext: "mp3", frames: nil, added: 0),
                    SyncSoundFacts(id: "x", kind: "bomb", name: "x", hash: facts.hash, size: 10, ext: "mp3", frames: nil, added: 0),
                    SyncSoundFacts(id: "x", kind: "gong", name: "x", hash: facts.hash, size: 10, ext: "mp3", frames: 1_000_000, added: 0),
                    SyncSoundFacts(id: "x", kind: "gong", name: "x", hash: facts.hash, size: 1 << 40, ext: "mp3", frames: nil, added: 0)] {
            let c = SyncChange(kind: .sound, id: "ffffffff-0000-4000-8000-000000000007", field: "sound", value: JSON(encoding: bad).line, stamp: stamp)
            #expect(throws: SyncError.self) { try a.sync.receive([c]) }
        }
    }
}
