import Foundation
import Glibc
@testable import StillMomentAudio
import Testing
@testable import StillMomentCore

/// The library store and import, each test with its own temporary STILLMOMENT home.
@Suite("Library store and import")
struct LibraryTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let fixtures = root.appendingPathComponent("Tests/Fixtures").path
    static let binary = root.appendingPathComponent(".build/debug/stillmoment").path

    static func fixture(_ name: String) -> String { fixtures + "/" + name }

    /// `frames` of a fixture in expected.json (FFmpeg's decode).
    static func expectedFrames(_ file: String) throws -> Int64 {
        let data = try Data(contentsOf: URL(fileURLWithPath: fixtures + "/expected.json"))
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let list = try #require(json["fixtures"] as? [[String: Any]])
        let entry = try #require(list.first { $0["file"] as? String == file })
        return Int64(try #require(entry["frames"] as? Int))
    }

    static func bytes(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    static func size(_ path: String) -> Int64? {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : nil
    }

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// The names in a folder, hidden ones included, sorted.
    static func listing(_ folder: String) -> [String] { LibraryStore.list(folder).sorted() }

    static func copy(_ from: String, to: String) throws {
        try bytes(from).write(to: URL(fileURLWithPath: to))
    }

    static func append(_ byte: UInt8, to path: String) throws {
        let h = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try h.seekToEnd()
        try h.write(contentsOf: Data([byte]))
        try h.close()
    }

    /// A store in a fresh home and its importer.
    static func fresh(_ home: LibraryTempHome) throws -> (LibraryStore, Importer) {
        let store = try LibraryStore(home: home.path)
        return (store, Importer(store: store))
    }

    static func imported(_ outcome: Importer.Outcome) -> Meditation? {
        if case .imported(let m) = outcome { return m }
        return nil
    }

    static func alreadyThere(_ outcome: Importer.Outcome) -> Meditation? {
        if case .alreadyThere(let m) = outcome { return m }
        return nil
    }

    /// Equal rows; `dateAdded` within 2 ms (the catalog keeps milliseconds, while the
    /// entry `importFile` returns holds the full `Date()`).
    static func same(_ a: Meditation?, _ b: Meditation?) -> Bool {
        guard var a, let b else { return a == nil && b == nil }
        guard abs(a.dateAdded.timeIntervalSince(b.dateAdded)) < 0.002 else { return false }
        a.dateAdded = b.dateAdded
        return a == b
    }

    static func same(_ a: [Meditation], _ b: [Meditation]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { same($0, $1) }
    }

    // MARK: 1. import of an MP3 and an M4A

    struct Case: Sendable, CustomTestStringConvertible {
        let file: String
        let ext: String
        let sampleRate: Int
        let teacher: String
        let name: String
        let album: String?
        var testDescription: String { file }
    }

    static let cases = [
        Case(file: "vbr.mp3", ext: "mp3", sampleRate: 44100, teacher: "Fixture Artist", name: "VBR Test", album: "Fixture Album"),
        Case(file: "editlist.m4a", ext: "m4a", sampleRate: 44100, teacher: "Fixture Artist", name: "Edit List Test", album: "Fixture Album"),
        Case(file: "cbr.mp3", ext: "mp3", sampleRate: 44100, teacher: "", name: "cbr", album: nil),
        Case(file: "moov-at-end.m4a", ext: "m4a", sampleRate: 48000, teacher: "", name: "moov at end", album: nil),
    ]

    @Test("an import catalogs the file's tags, exact length, size and hash and stores a byte-identical copy", arguments: cases)
    func importsFile(_ c: Case) throws {
        let home = LibraryTempHome()
        let (store, importer) = try Self.fresh(home)
        let source = Self.fixture(c.file)
        var warnings: [String] = []
        let outcome = try importer.importFile(source, warn: { warnings.append($0) })
        let m = try #require(Self.imported(outcome), "expected .imported, got \(outcome)")

        #expect(m.teacher == c.teacher)
        #expect(m.name == c.name)
        #expect(m.album == c.album)
        #expect(m.originalName == c.file)
        #expect(m.durationFrames == (try Self.expectedFrames(c.file)))
        #expect(m.sampleRate == c.sampleRate)
        #expect(m.size == Self.size(source))
        #expect(m.lastPosition == nil && m.trimStart == nil && m.trimEnd == nil)
        #expect(m.loudnessGain.isFinite)
        #expect(UUID(uuidString: m.id) != nil && m.id == m.id.lowercased())
        #expect(m.storedFile == "\(m.id).\(c.ext)")

        let stored = store.meditationsFolder + "/" + m.storedFile
        #expect(store.path(of: m) == stored)
        #expect(Self.exists(stored))
        #expect(try Self.bytes(stored) == (try Self.bytes(source)))
        #expect(m.contentHash == (try ContentHash.of(file: stored)))
        #expect(m.contentHash.count == 32)

        var st = stat()
        #expect(stat(store.meditationsFolder, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o700)
        #expect(Self.listing(store.meditationsFolder) == [m.storedFile], "no .import-* file remains")
        #expect(Self.same(try store.all(), [m]))
    }

    @Test("an MP3's import stores its frame index; a guided start far into it reads a few frames, not all before")
    func seekIndex() throws {
        let home = LibraryTempHome()
        let (store, importer) = try Self.fresh(home)
        // cbr.mp3 without its Info tag, 60 times over (2,400 frames, no frame count)
        let bytes = try [UInt8](Self.bytes(Self.fixture("cbr.mp3")))
        let probe = try #require(try MPEGProbe.probe(try AudioFile(path: Self.fixture("cbr.mp3"))))
        let body = bytes[(Int(probe.firstFrameOffset) + probe.header.frameLength)...]
        let source = home.path + "/long.mp3"
        try Data(Array(repeating: Array(body), count: 60).joined()).write(to: URL(fileURLWithPath: source))
        let m = try #require(Self.imported(try importer.importFile(source)))
        let index = try #require(store.seekIndex(for: m))
        #expect(index.offsets.count > 10 && index.offsets.first == 0, "\(index.offsets.count) offsets, step \(index.step)")

        // Opened with it, a seek near the end reads about one buffer of the file; the same
        // samples as a decoder that read its way there.
        let path = store.path(of: m)
        let far = m.durationFrames - 4410
        func tail(_ decoder: MP3Decoder) throws -> (samples: [Float], reads: UInt64) {
            let before = decoder.fileReads
            try decoder.seek(toFrame: far)
            let reads = decoder.fileReads - before
            var all: [Float] = []
            var buffer = [Float](repeating: 0, count: 4096 * 2)
            while true {
                let n = try buffer.withUnsafeMutableBufferPointer { b -> Int in
                    guard let base = b.baseAddress else { return 0 }
                    return try decoder.read(into: base, frames: 4096)
                }
                if n == 0 { break }
                all += buffer[0..<(n * 2)]
            }
            return (all, reads)
        }
        let file = try AudioFile(path: path)
        let mpeg = try #require(try MPEGProbe.probe(file))
        let indexed = try tail(try MP3Decoder(file: file, probe: mpeg, knownFrames: m.durationFrames, knownIndex: index))
        let plain = try tail(try MP3Decoder(file: try AudioFile(path: path), probe: mpeg, knownFrames: m.durationFrames))
        #expect(indexed.samples == plain.samples && !plain.samples.isEmpty)
        #expect(indexed.reads <= 2, "with the index: \(indexed.reads) reads of the file")
        #expect(plain.reads >= 40, "without: \(plain.reads) reads")

        // An index that cannot be one of the file is none; deleting the meditation drops it.
        #expect(SeekIndex(step: index.step, offsets: index.offsets.reversed(), fileSize: m.size) == nil)
        #expect(SeekIndex(step: index.step, offsets: index.offsets, fileSize: index.offsets.last ?? 0) == nil)
        #expect(SeekIndex(step: 0, offsets: index.offsets, fileSize: m.size) == nil)
        #expect(SeekIndex(step: index.step, bytes: index.bytes, fileSize: m.size) == index)
        #expect(SeekIndex(step: index.step, bytes: Array(index.bytes.dropLast()), fileSize: m.size) == nil)
        // A damaged row (a hand edit, a restored backup) is no index, and no crash.
        for (column, value) in [("step", "'abc'"), ("step", "1.5"), ("offsets", "42"), ("offsets", "'text'")] {
            try store.write { db in
                try LibraryStore.saveSeekIndex(index, for: m.id, db)
                try db.execute(sql: "UPDATE seekIndex SET \(column) = \(value) WHERE meditationID = ?", arguments: [m.id])
            }
            #expect(store.seekIndex(for: m) == nil, "\(column) = \(value)")
        }
        // A meditation without one (imported before it was kept) gets it, from a scan of its
        // frame headers, by `library verify --repair`; once.
        try store.write { db in try db.execute(sql: "DELETE FROM seekIndex") }
        let done = try store.repair()
        #expect(done.contains { $0.contains("frame index of 1 MP3") }, "\(done)")
        #expect(store.seekIndex(for: m) == index)
        #expect(try store.repair().allSatisfy { !$0.contains("frame index") })
        try store.delete(m)
        #expect(store.seekIndex(for: m) == nil)
    }

    @Test("--teacher and --name override the tags, trimmed; blank options fall back to the tags")
    func optionsOverrideTags() throws {
        let home = LibraryTempHome()
        let (store, importer) = try Self.fresh(home)
        let m = try #require(Self.imported(try importer.importFile(
            Self.fixture("vbr.mp3"), options: Importer.Options(teacher: "  Tara Brach \n", name: "\tRAIN  "))))
        #expect(m.teacher == "Tara Brach")
        #expect(m.name == "RAIN")
        #expect(m.album == "Fixture Album")

        let m2 = try #require(Self.imported(try importer.importFile(
            Self.fixture("editlist.m4a"), options: Importer.Options(teacher: "   ", name: " \t"))))
        #expect(m2.teacher == "Fixture Artist")
        #expect(m2.name == "Edit List Test")
        #expect(try store.all().count == 2)
    }

    // MARK: 2. name from the file name

    @Test("without a title tag the name comes from the file name")
    func nameFromFileNameOnImport() throws {
        let home = LibraryTempHome()
        let sources = LibraryTempHome()
        let (store, importer) = try Self.fresh(home)
        let source = sources.path + "/03 - Body_Scan.mp3"
        try Self.copy(Self.fixture("cbr.mp3"), to: source)
        let m = try #require(Self.imported(try importer.importFile(source)))
        #expect(m.name == "Body Scan")
        #expect(m.teacher == "")
        #expect(m.album == nil)
        #expect(m.originalName == "03 - Body_Scan.mp3")
        #expect(Self.same(try store.all(), [m]))
    }

    @Test("nameFromFile", arguments: [
        ("03 - Body_Scan.mp3", "Body Scan"),
        ("1. Morning Sit.m4a", "Morning Sit"),
        ("02_evening-calm.mp3", "evening calm"),
        ("Loving Kindness.mp3", "Loving Kindness"),
        ("2024 Retreat.mp3", "2024 Retreat"),     // four digits: a year, not a track number
        ("007.mp3", "007"),                       // nothing but a number stays
        ("a.b.c.mp3", "a b c"),
        ("  Sitting   Still  .mp3", "Sitting Still"),
        ("NoExtension", "NoExtension"),
    ])
    func nameFromFile(_ file: String, _ expected: String) {
        #expect(Importer.nameFromFile(file) == expected)
    }

    // MARK: 3. duplicates

    @Test("importing the same content twice returns the first entry and copies nothing")
    func duplicateImport() throws {
        let home = LibraryTempHome()
        let sources = LibraryTempHome()
        let (store, importer) = try Self.fresh(home)
        let first = try #require(Self.imported(try importer.importFile(Self.fixture("vbr.mp3"))))
        #expect(Self.same(Self.alreadyThere(try importer.importFile(Self.fixture("vbr.mp3"))), first))
        // The same content under another name and other options is still the same meditation.
        let renamed = sources.path + "/other name.mp3"
        try Self.copy(Self.fixture("vbr.mp3"), to: renamed)
        #expect(Self.same(Self.alreadyThere(try importer.importFile(renamed, options: Importer.Options(name: "Else"))), first))
        #expect(Self.listing(store.meditationsFolder) == [first.storedFile])
        #expect(Self.same(try store.all(), [first]))
    }

    // MARK: 4. bad inputs

    /// Imports `path`, expecting a one-line CoreError naming the path and nothing left behind.
    static func expectRefused(_ path: String, _ store: LibraryStore, _ importer: Importer,
                              containing extra: String? = nil,
                              sourceLocation: SourceLocation = #_sourceLocation) {
        let before = listing(store.meditationsFolder)
        do {
            let outcome = try importer.importFile(path)
            Issue.record("\(path) was accepted: \(outcome)", sourceLocation: sourceLocation)
        } catch {
            let text = error.description
            #expect(text.contains(path), "\(text)", sourceLocation: sourceLocation)
            #expect(!text.contains("\n"), "\(text)", sourceLocation: sourceLocation)
            if let extra { #expect(text.contains(extra), "\(text)", sourceLocation: sourceLocation) }
        }
        #expect(listing(store.meditationsFolder) == before, sourceLocation: sourceLocation)
        #expect(listing(store.meditationsFolder).allSatisfy { !$0.hasPrefix(".import-") }, sourceLocation: sourceLocation)
        #expect((try? store.all())?.isEmpty == true, sourceLocation: sourceLocation)
    }

    @Test("a file that is not playable audio is refused, leaving nothing",
          arguments: ["empty.mp3", "text.mp3", "truncated.mp3", "alac.m4a", "random.bin"])
    func badFixtureRefused(_ file: String) throws {
        let home = LibraryTempHome()
        let (store, importer) = try Self.fresh(home)
        #expect(Self.listing(store.meditationsFolder).isEmpty)
        Self.expectRefused(Self.fixture(file), store, importer)
        #expect(Self.listing(store.meditationsFolder).isEmpty)
    }

    @Test("a missing file, a folder, a FIFO and a dangling symlink are refused, leaving nothing")
    func specialPathsRefused() throws {
        let home = LibraryTempHome()
        let sources = LibraryTempHome()
        let (store, importer) = try Self.fresh(home)

        Self.expectRefused(sources.path + "/missing.mp3", store, importer)

        let folder = sources.path + "/folder.mp3"
        #expect(mkdir(folder, 0o700) == 0)
        Self.expectRefused(folder, store, importer, containing: "folder")

        let fifo = sources.path + "/pipe.mp3"
        #expect(mkfifo(fifo, 0o600) == 0)
        Self.expectRefused(fifo, store, importer, containing: "FIFO")

        let link = sources.path + "/dangling.mp3"
        #expect(symlink(sources.path + "/gone.mp3", link) == 0)
        Self.expectRefused(link, store, importer, containing: "symbolic link")

        #expect(Self.listing(store.meditationsFolder).isEmpty)
    }

    // MARK: 5. full disk (simulated by the free-space check)

    @Test("an import that would leave less than the reserve free is refused, leaving nothing")
    func notEnoughSpace() throws {
        let home = LibraryTempHome()
        var (store, importer) = try Self.fresh(home)
        importer.reserveBytes = Int64.max / 4
        let source = Self.fixture("vbr.mp3")
        Self.expectRefused(source, store, importer, containing: "not enough space")
        #expect(Self.listing(store.meditationsFolder).isEmpty)
        store = try LibraryStore(home: home.path)
        #expect(try store.verify().isEmpty)
    }

    // MARK: 6. delete and find

    @Test("delete removes the row and the file, and nothing else")
    func deleteRemovesRowAndFile() throws {
        let home = LibraryTempHome()
        let (store, importer) = try Self.fresh(home)
        let a = try #require(Self.imported(try importer.importFile(Self.fixture("vbr.mp3"))))
        let b = try #require(Self.imported(try importer.importFile(Self.fixture("editlist.m4a"))))
        try store.delete(a)
        #expect(!Self.exists(store.path(of: a)))
        #expect(Self.exists(store.path(of: b)))
        #expect(Self.same(try store.all(), [b]))
        #expect(Self.listing(store.meditationsFolder) == [b.storedFile])
        #expect(try store.verify().isEmpty)
        // Deleting again (file and row gone) does not fail.
        try store.delete(a)
        #expect(Self.same(try store.all(), [b]))
    }

    @Test("find by full UUID, by unique prefix, by exact name; errors for unknown and ambiguous keys")
    func find() throws {
        let home = LibraryTempHome()
        let (store, importer) = try Self.fresh(home)
        let a = try #require(Self.imported(try importer.importFile(Self.fixture("vbr.mp3"))))
        let b = try #require(Self.imported(try importer.importFile(Self.fixture("editlist.m4a"))))
        let c = try #require(Self.imported(try importer.importFile(
            Self.fixture("cbr.mp3"), options: Importer.Options(name: "Same"))))
        let d = try #require(Self.imported(try importer.importFile(
            Self.fixture("moov-at-end.m4a"), options: Importer.Options(name: "same"))))

        #expect(Self.same(try store.find(a.id), a))
        #expect(Self.same(try store.find(b.id.uppercased()), b))
        #expect(Self.same(try store.find(String(a.id.prefix(8))), a))
        #expect(Self.same(try store.find(String(b.id.prefix(8)).uppercased()), b))
        #expect(Self.same(try store.find("vbr test"), a))
        #expect(Self.same(try store.find("EDIT LIST TEST"), b))

        // Unknown: no id, prefix or name matches; a partial name is not enough.
        for key in ["nothing like it", "VBR", "ffffffff-ffff-ffff-ffff-ffffffffffff"] {
            do {
                let m = try store.find(key)
                Issue.record("'\(key)' found \(m.name)")
            } catch {
                #expect(error.description.contains(key), "\(error)")
                #expect(error.description.contains("no meditation"), "\(error)")
            }
        }
        // Ambiguous names.
        do {
            let m = try store.find("SAME")
            Issue.record("'SAME' found \(m.name)")
        } catch {
            #expect(error.description.contains("several"), "\(error)")
            #expect(error.description.contains(String(c.id.prefix(8))) && error.description.contains(String(d.id.prefix(8))), "\(error)")
        }
        // An ambiguous prefix: two rows whose ids share their first 8 characters.
        var x = a, y = a
        x.id = "abcdef01-0000-4000-8000-000000000001"
        x.storedFile = x.id + ".mp3"
        x.contentHash = String(repeating: "1", count: 32)
        y.id = "abcdef01-0000-4000-8000-000000000002"
        y.storedFile = y.id + ".mp3"
        y.contentHash = String(repeating: "2", count: 32)
        try store.write { [x, y] db in
            try x.insert(db)
            try y.insert(db)
        }
        do {
            let m = try store.find("abcdef01")
            Issue.record("'abcdef01' found \(m.id)")
        } catch {
            #expect(error.description.contains("several"), "\(error)")
        }
        #expect(Self.same(try store.find("abcdef01-0000-4000-8000-000000000002"), y))
        #expect(Self.same(try store.find(x.id), x))
    }

    // MARK: 7. verify and repair

    @Test("verify finds a missing file and a stray file; repair removes the entry and moves the stray to Lost+Found")
    func verifyAndRepair() throws {
        let home = LibraryTempHome()
        let (store, importer) = try Self.fresh(home)
        let a = try #require(Self.imported(try importer.importFile(Self.fixture("vbr.mp3"))))
        let b = try #require(Self.imported(try importer.importFile(Self.fixture("editlist.m4a"))))
        #expect(try store.verify() == [])

        #expect(unlink(store.path(of: a)) == 0)
        let problems = try store.verify()
        #expect(problems.map(\.kind) == [.missingFile])
        #expect(problems.first?.file == a.storedFile)
        #expect(problems.first?.meditation == a.name)

        let notes = store.meditationsFolder + "/notes.txt"
        try Data("stray".utf8).write(to: URL(fileURLWithPath: notes))
        let both = try store.verify()
        #expect(both.count == 2)
        #expect(both.contains { $0.kind == .missingFile && $0.file == a.storedFile })
        #expect(both.contains { $0.kind == .strayFile && $0.file == "notes.txt" && $0.meditation == nil })

        let done = try store.repair()
        #expect(done.count == 2, "\(done)")
        #expect(try store.verify() == [])
        #expect(Self.same(try store.all(), [b]))
        #expect(!Self.exists(notes))
        #expect(try Self.bytes(store.lostAndFound + "/notes.txt") == Data("stray".utf8), "moved, never deleted")
        #expect(Self.listing(store.meditationsFolder) == [b.storedFile])
    }

    @Test("verify finds a changed size and changed content; repair leaves both")
    func verifyChangedFiles() throws {
        let home = LibraryTempHome()
        let (store, importer) = try Self.fresh(home)
        let a = try #require(Self.imported(try importer.importFile(Self.fixture("vbr.mp3"))))
        let b = try #require(Self.imported(try importer.importFile(Self.fixture("editlist.m4a"))))

        try Self.append(0, to: store.path(of: a))
        #expect(try store.verify() == [LibraryStore.Problem(kind: .sizeMismatch, file: a.storedFile, meditation: a.name)])

        // Same size, one byte different.
        var content = try Self.bytes(store.path(of: b))
        content[content.count / 2] ^= 0xFF
        try content.write(to: URL(fileURLWithPath: store.path(of: b)))
        #expect(Self.size(store.path(of: b)) == b.size)
        let problems = try store.verify()
        #expect(problems.count == 2)
        #expect(problems.contains(LibraryStore.Problem(kind: .sizeMismatch, file: a.storedFile, meditation: a.name)))
        #expect(problems.contains(LibraryStore.Problem(kind: .hashMismatch, file: b.storedFile, meditation: b.name)))

        let done = try store.repair()
        #expect(done.count == 2 && done.allSatisfy { $0.hasPrefix("left ") }, "\(done)")
        #expect(try store.all().count == 2)
        #expect(Self.exists(store.path(of: a)) && Self.exists(store.path(of: b)))
        #expect(try store.verify().count == 2)
    }

    // MARK: 8. recovery of an interrupted import

    @Test("opening the store removes temporary files of dead imports and nothing else")
    func recoversInterruptedImports() throws {
        let home = LibraryTempHome()
        let (store, importer) = try Self.fresh(home)
        let kept = try #require(Self.imported(try importer.importFile(Self.fixture("vbr.mp3"))))
        let folder = store.meditationsFolder
        let cbr = try Self.bytes(Self.fixture("cbr.mp3"))

        let unlisted = folder + "/" + UUID().uuidString.lowercased() + ".mp3"      // renamed, never cataloged
        let temporary = folder + "/.import-" + UUID().uuidString.lowercased() + ".mp3"  // still copying
        let keep = folder + "/keep.mp3"                                             // not an import name
        let busyTemp = folder + "/.import-" + UUID().uuidString.lowercased() + ".m4a"    // a live import holds it
        let busyFile = folder + "/" + UUID().uuidString.lowercased() + ".m4a"            // a live import holds it
        for p in [unlisted, temporary, keep, busyTemp, busyFile] {
            try cbr.write(to: URL(fileURLWithPath: p))
        }
        let fd1 = open(busyTemp, O_RDONLY | O_CLOEXEC)
        let fd2 = open(busyFile, O_RDONLY | O_CLOEXEC)
        defer { close(fd1); close(fd2) }
        #expect(flock(fd1, LOCK_EX | LOCK_NB) == 0)
        #expect(flock(fd2, LOCK_EX | LOCK_NB) == 0)

        let reopened = try LibraryStore(home: home.path)
        #expect(Self.exists(unlisted), "a complete copy without a row is never deleted")
        #expect(!Self.exists(temporary))
        #expect(Self.exists(keep))
        #expect(Self.exists(busyTemp), "a locked temporary file belongs to an import in progress")
        #expect(Self.exists(busyFile), "a locked file belongs to an import in progress")
        #expect(Self.exists(reopened.path(of: kept)))
        #expect(Self.same(try reopened.all(), [kept]))

        // The import's locks released (as when it ends): the next open removes its
        // temporary file but never a complete one; verify reports it and repair adopts it.
        flock(fd1, LOCK_UN)
        flock(fd2, LOCK_UN)
        let third = try LibraryStore(home: home.path)
        #expect(!Self.exists(busyTemp) && Self.exists(busyFile))
        let found = try third.verify()
        #expect(found.count == 3, "\(found)")
        #expect(found.contains(LibraryStore.Problem(kind: .strayFile, file: "keep.mp3", meditation: nil)))
        #expect(found.filter { $0.kind == .orphanFile }.map(\.file).sorted()
                == [unlisted, busyFile].map { String($0.split(separator: "/").last ?? "") }.sorted())
        let done = try third.repair()
        // keep.mp3 moved aside, one copy adopted, the other moved aside; the adopted one's
        // frame index stored (MPEG content, whichever of the two names it has)
        #expect(done.count == 4, "\(done)")
        #expect(try third.verify() == [])
        // The two complete copies of cbr.mp3: one adopted, the second moved aside.
        #expect(try third.all().count == 2)
        #expect(Self.listing(third.lostAndFound).count == 2)
        #expect(Self.listing(folder).count == 2)
    }

    // MARK: 9, 10. concurrency

    /// Runs `body(0..<n)` on `n` threads released together, and waits for all.
    static func together(_ n: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let done = DispatchGroup()
        let go = DispatchSemaphore(value: 0)
        for i in 0..<n {
            done.enter()
            Thread {
                go.wait()
                body(i)
                done.leave()
            }.start()
        }
        for _ in 0..<n { go.signal() }
        done.wait()
    }

    static func migrations(_ store: LibraryStore) throws -> [String] {
        try store.read { db in try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations") }
    }

    /// Opens the store at `path` on two threads at once, `rounds` times; the errors.
    static func openTogether(_ path: () -> String, rounds: Int) throws -> [String] {
        var errors: [String] = []
        for _ in 0..<rounds {
            let home = path()
            let results = LibraryResults<String>()
            together(2) { _ in
                do { _ = try LibraryStore(home: home) } catch { results.append("\(error)") }
            }
            errors += results.items
            let store = try LibraryStore(home: home)
            // Core's, each once, and only registered ones beside them (the web tests in this process may register theirs).
            let applied = try migrations(store)
            #expect(Array(applied.prefix(LibraryStore.coreMigrationIdentifiers.count)) == LibraryStore.coreMigrationIdentifiers)
            #expect(Set(applied).subtracting(LibraryStore.coreMigrationIdentifiers).isSubset(of: LibraryStore.registeredMigrations.map(\.identifier)))
            #expect(try store.all().isEmpty)
        }
        return errors
    }

    /// Runs `stillmoment list` twice at once on the store at `path`, `rounds` times.
    static func listTogether(_ path: () -> String, rounds: Int) throws {
        try #require(access(binary, X_OK) == 0, "build \(binary) first")
        for _ in 0..<rounds {
            let home = path()
            var env = ProcessInfo.processInfo.environment
            env["STILLMOMENT_HOME"] = home
            var runs: [(Process, Pipe)] = []
            for _ in 0..<2 {
                let p = Process()
                p.executableURL = URL(fileURLWithPath: binary)
                p.arguments = ["list"]
                p.environment = env
                let err = Pipe()
                p.standardError = err
                p.standardOutput = FileHandle.nullDevice
                runs.append((p, err))
            }
            for (p, _) in runs { try p.run() }
            for (p, err) in runs {
                p.waitUntilExit()
                let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                #expect(p.terminationStatus == 0, "stderr: \(text)")
                #expect(text.isEmpty, "stderr: \(text)")
            }
            let store = try LibraryStore(home: home)
            // Core's, the web app's and the home front-ends' (the executable registers them), each once.
            #expect(try Set(migrations(store)) == Set(LibraryStore.coreMigrationIdentifiers
                                                      + ["v5-web", "v9-web-lockout", "v11-home-buttons", "v12-home-hooks", "v20-web-scope"]))
        }
    }

    @Test("two threads opening a new store together: both open it, migrations run once")
    func concurrentOpenNewStoreThreads() throws {
        let homes = LibraryResults<LibraryTempHome>()
        let errors = try Self.openTogether({ let h = LibraryTempHome(); homes.append(h); return h.path + "/new/home" }, rounds: 20)
        #expect(errors.isEmpty, "\(errors)")
    }

    @Test("two processes opening a new store together (stillmoment list): both exit 0, migrations once")
    func concurrentOpenNewStoreProcesses() throws {
        let homes = LibraryResults<LibraryTempHome>()
        try Self.listTogether({ let h = LibraryTempHome(); homes.append(h); return h.path + "/store" }, rounds: 20)
    }

    @Test("threads and processes opening an existing store together: all open it")
    func concurrentOpenExistingStore() throws {
        let home = LibraryTempHome()
        let path = home.path + "/store"
        _ = try LibraryStore(home: path)
        let errors = try Self.openTogether({ path }, rounds: 20)
        #expect(errors.isEmpty, "\(errors)")
        try Self.listTogether({ path }, rounds: 3)
    }

    /// Two threads, each opening its own store on `path` (together with the import, or
    /// before it), import a different file at once.
    static func importTogether(_ path: String, openFirst: Bool) throws {
        let files = [fixture("vbr.mp3"), fixture("editlist.m4a")]
        let opened = openFirst ? [try LibraryStore(home: path), try LibraryStore(home: path)] : []
        let results = LibraryResults<Result<Importer.Outcome, CoreError>>()
        together(2) { i in
            results.append(Result { () throws(CoreError) -> Importer.Outcome in
                let store = openFirst ? opened[i] : try LibraryStore(home: path)
                return try Importer(store: store).importFile(files[i])
            })
        }
        var landed: [Meditation] = []
        for r in results.items {
            switch r {
            case .success(let o):
                if let m = imported(o) { landed.append(m) } else { Issue.record("not imported: \(o)") }
            case .failure(let e): Issue.record("import failed: \(e)")
            }
        }
        #expect(landed.count == 2)
        let store = try LibraryStore(home: path)
        let rows = try store.all()
        #expect(rows.count == 2)
        #expect(Set(rows.map(\.id)) == Set(landed.map(\.id)))
        #expect(Set(rows.map(\.originalName)) == ["vbr.mp3", "editlist.m4a"])
        #expect(listing(store.meditationsFolder) == rows.map(\.storedFile).sorted())
        #expect(try store.verify() == [])
    }

    @Test("two imports at once on different files, each with its own store: both land")
    func concurrentImports() throws {
        for _ in 0..<5 {
            let home = LibraryTempHome()
            _ = try LibraryStore(home: home.path)
            try Self.importTogether(home.path, openFirst: true)
        }
    }

    @Test("two imports at once into a new home, each thread opening its own store: both land")
    func concurrentImportsNewHome() throws {
        for _ in 0..<20 {
            let home = LibraryTempHome()
            try Self.importTogether(home.path, openFirst: false)
        }
    }

    @Test("opening the store while an import runs never removes the import's temporary file")
    func openDuringImport() throws {
        for _ in 0..<200 {
            let home = LibraryTempHome()
            _ = try LibraryStore(home: home.path)
            try Self.importTogether(home.path, openFirst: false)
        }
    }

    // MARK: 11. analysis

    @Test("analysis: exact length, finite loudness, gain to -16 LUFS limited by the true peak",
          arguments: ["vbr.mp3", "editlist.m4a", "moov-at-end.m4a"])
    func analysis(_ file: String) throws {
        let a = try AudioAnalysis.run(try StillMomentAudio.openDecoder(path: Self.fixture(file)))
        #expect(a.frames == (try Self.expectedFrames(file)))
        let loudness = try #require(a.loudness)
        #expect(loudness.isFinite && loudness < 0)
        #expect(a.truePeak.isFinite && a.truePeak <= 0.5)
        let expected = min(AudioAnalysis.targetLoudness - loudness, AudioAnalysis.peakCeiling - a.truePeak)
        #expect(abs(a.gain - expected) < 1e-9)
        #expect(a.truePeak + a.gain <= AudioAnalysis.peakCeiling + 0.01)
        #expect(a.gain <= AudioAnalysis.targetLoudness - loudness + 1e-9)

        // The import stores the same gain.
        let home = LibraryTempHome()
        let (_, importer) = try Self.fresh(home)
        let m = try #require(Self.imported(try importer.importFile(Self.fixture(file))))
        #expect(abs(m.loudnessGain - a.gain) < 1e-9)
        #expect(m.durationFrames == a.frames)
    }
}

/// A temporary folder (made with mkdtemp) removed when done.
final class LibraryTempHome: Sendable {
    let path: String
    init() {
        var template = Array((NSTemporaryDirectory() + "/stillmoment-library-XXXXXX").utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard let p else { fatalError("mkdtemp: \(String(cString: strerror(errno)))") }
        path = String(cString: p)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Results gathered from several threads.
final class LibraryResults<T: Sendable>: @unchecked Sendable {
    // @unchecked: every access holds the lock.
    private let lock = NSLock()
    private var stored: [T] = []
    func append(_ item: T) { lock.withLock { stored.append(item) } }
    var items: [T] { lock.withLock { stored } }
}
