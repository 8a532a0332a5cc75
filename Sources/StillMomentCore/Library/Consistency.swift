/// The store's consistency rules: catalog rows are checked when read, files and rows are
/// compared by `verify`, and `repair` puts things right without deleting anything the
/// user owns. Only temporary files of dead imports (`.import-*`, unlocked) are removed on
/// their own; a complete stored file without a row is adopted back into the catalog, or
/// moved to `Lost+Found/` when it cannot be read.
import FoundationEssentials
import Glibc
import GRDB
import StillMomentAudio

extension LibraryStore {
    /// A catalog row that cannot be used: unreadable fields, impossible values, or a file
    /// name the store never makes (`../../etc/passwd`).
    public struct DamagedRow: Sendable, Equatable {
        public let table: String
        public let rowid: Int64
        public let id: String
        public let storedFile: String
        public let reason: String
        /// What could still be read, kept when the file is adopted again.
        public let name: String?
        public let teacher: String?
        public let album: String?
    }

    public struct CatalogRows: Sendable {
        public var meditations: [Meditation] = []
        public var sounds: [CustomSound] = []
        public var damaged: [DamagedRow] = []
    }

    /// Every row, decoded one by one: a damaged row never makes the others unreadable.
    public func catalogRows() throws(CoreError) -> CatalogRows {
        try read { db in
            var result = CatalogRows()
            for row in try Row.fetchAll(db, sql: "SELECT rowid AS sm_rowid, * FROM meditation") {
                let decoded = try? Meditation(row: row)
                if let m = decoded, m.damage == nil {
                    result.meditations.append(m)
                } else {
                    let why = decoded?.damage ?? tr("its fields cannot be read", "seine Felder sind nicht lesbar")
                    result.damaged.append(Self.damaged(row, table: "meditation", reason: why))
                }
            }
            for row in try Row.fetchAll(db, sql: "SELECT rowid AS sm_rowid, * FROM customSound") {
                if let s = try? CustomSound(row: row), StoredName.isMeditation(s.storedFile),
                   s.kind == "gong" || s.kind == "ambience", !s.id.isEmpty {
                    result.sounds.append(s)
                } else {
                    result.damaged.append(Self.damaged(row, table: "customSound", reason: tr("its fields cannot be read", "seine Felder sind nicht lesbar")))
                }
            }
            return result
        }
    }

    static func damaged(_ row: Row, table: String, reason: String) -> DamagedRow {
        func text(_ column: String) -> String? {
            let value: DatabaseValue = row[column] ?? .null
            return String.fromDatabaseValue(value).map(Display.clean)
        }
        let rowid: DatabaseValue = row["sm_rowid"] ?? .null
        return DamagedRow(table: table, rowid: Int64.fromDatabaseValue(rowid) ?? -1, id: text("id") ?? "?",
                          storedFile: text("storedFile") ?? "?", reason: reason,
                          name: text("name"), teacher: text("teacher"), album: text("album"))
    }

    // MARK: opening

    /// Removes temporary files of imports that died (nobody holds their lock). Complete
    /// files are never removed here.
    func recoverInterruptedImports() throws(CoreError) {
        for folder in [meditationsFolder, soundsFolder] {
            for name in Self.list(folder) where name.hasPrefix(".import-") {
                Self.removeIfUnlocked(folder + "/" + name)
            }
        }
    }

    /// A catalog with no meditations beside stored files was lost (deleted, emptied,
    /// damaged and recreated): the files are adopted back, not treated as strays.
    func rebuildIfCatalogLost() throws(CoreError) {
        let files = Self.list(meditationsFolder).filter(StoredName.isMeditation)
        guard !files.isEmpty else { return }
        let count = try read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM meditation") ?? 0 }
        guard count == 0 else { return }
        let lock = home + "/library.lock"
        let done: [String]
        do {
            done = try Self.withLock(lock) { () throws -> [String] in
                // Another process may have rebuilt it while we waited for the lock.
                let again = try read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM meditation") ?? 0 }
                guard again == 0 else { return [] }
                return try adoptOrphans(keeping: [:])
            }
        } catch let error as CoreError {
            throw error
        } catch {
            throw CoreError.io(path: lock, reason: .same("\(error)"))
        }
        if !done.isEmpty {
            let n = files.count
            note(n == 1 ? tr("the catalog was empty beside 1 stored file; rebuilt it from them:",
                             "der Katalog war leer, obwohl 1 Datei gespeichert ist; aus ihr neu aufgebaut:")
                        : tr("the catalog was empty beside \(n) stored files; rebuilt it from them:",
                             "der Katalog war leer, obwohl \(n) Dateien gespeichert sind; aus ihnen neu aufgebaut:"))
            done.forEach(note)
        }
    }

    // MARK: verify and repair

    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        public enum Kind: Sendable, Equatable { case missingFile, sizeMismatch, hashMismatch, orphanFile, strayFile, damagedRow }
        public let kind: Kind
        public let file: String
        public let meditation: String?
        public var detail: String? = nil
        public var description: String {
            let m = meditation ?? "?"
            switch kind {
            case .missingFile: return tr("missing file \(file) for \(m)", "Datei \(file) für \(m) fehlt")
            case .sizeMismatch:
                return tr("size differs for \(file) (\(m)): the copy is damaged", "Größe von \(file) (\(m)) weicht ab: die Kopie ist beschädigt")
            case .hashMismatch:
                return tr("content changed for \(file) (\(m)): the copy is damaged", "Inhalt von \(file) (\(m)) verändert: die Kopie ist beschädigt")
            case .orphanFile:
                return tr("stored file \(file) has no catalog entry (`library verify --repair` adopts it)",
                          "gespeicherte Datei \(file) hat keinen Katalogeintrag (`library verify --repair` nimmt sie wieder auf)")
            case .strayFile:
                return tr("unknown file \(file) in the store (`library verify --repair` moves it to Lost+Found)",
                          "unbekannte Datei \(file) in der Bibliothek (`library verify --repair` verschiebt sie nach Lost+Found)")
            case .damagedRow:
                let why = detail ?? tr("unreadable", "unlesbar")
                return tr("damaged catalog entry \(m) (\(file)): \(why)", "beschädigter Katalogeintrag \(m) (\(file)): \(why)")
            }
        }
    }

    /// Checks every row against its file (exists, size, hash), finds damaged rows and
    /// files without a row. Files an import is writing (locked) are not counted.
    public func verify() throws(CoreError) -> [Problem] {
        var problems: [Problem] = []
        let rows = try catalogRows()
        var known = Set<String>()
        for d in rows.damaged {
            if StoredName.isMeditation(d.storedFile) { known.insert(d.storedFile) }
            problems.append(Problem(kind: .damagedRow, file: d.storedFile, meditation: d.name ?? d.id, detail: d.reason))
        }
        for m in rows.meditations {
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
        for s in rows.sounds {
            known.insert(s.storedFile)
            if access(soundsFolder + "/" + s.storedFile, F_OK) != 0 {
                problems.append(Problem(kind: .missingFile, file: s.storedFile, meditation: s.name))
            }
        }
        for folder in [meditationsFolder, soundsFolder] {
            // (Files arriving by sync are `.arriving-*`, kept until whole and adopted.)
            for name in Self.list(folder) where !name.hasPrefix(".import-") && !name.hasPrefix(".arriving-") && !known.contains(name) {
                let path = folder + "/" + name
                // An import holds its file locked until its row is committed.
                guard Self.isUnlocked(path) || access(path, F_OK) != 0 else { continue }
                let adoptable = folder == meditationsFolder && StoredName.isMeditation(name)
                problems.append(Problem(kind: adoptable ? .orphanFile : .strayFile, file: Display.clean(name), meditation: nil))
            }
        }
        return problems
    }

    /// Puts the store right and returns what was done, a line each. It never deletes a
    /// file: stored files without a row are adopted (or moved to Lost+Found/), damaged
    /// rows are rebuilt from their file, rows whose file is gone are removed, and a
    /// damaged copy is left for `import` of the original to replace. It takes the
    /// catalog lock and each file's lock, as an import does.
    public func repair() throws(CoreError) -> [String] {
        let lock = home + "/library.lock"
        do {
            return try Self.withLock(lock) { () throws -> [String] in try repairLocked() }
        } catch let error as CoreError {
            throw error
        } catch {
            throw CoreError.io(path: lock, reason: .same("\(error)"))
        }
    }

    private func repairLocked() throws(CoreError) -> [String] {
        var done: [String] = []
        let rows = try catalogRows()
        // Damaged rows go; what could be read of them names the file when it is adopted.
        var keep: [String: DamagedRow] = [:]
        for d in rows.damaged {
            let rowid = d.rowid, table = d.table
            try write { db in
                try db.execute(sql: "DELETE FROM \(table == "customSound" ? "customSound" : "meditation") WHERE rowid = ?",
                               arguments: [rowid])
            }
            if StoredName.isMeditation(d.storedFile) { keep[d.storedFile] = d }
            let what = d.name ?? d.id
            done.append(tr("removed the damaged catalog entry \(what) (\(d.reason))", "beschädigten Katalogeintrag \(what) entfernt (\(d.reason))"))
        }
        for p in try verify() {
            switch p.kind {
            case .missingFile:
                let file = p.file
                _ = try write { db in
                    try db.execute(sql: "DELETE FROM meditation WHERE storedFile = ?", arguments: [file])
                    try db.execute(sql: "DELETE FROM customSound WHERE storedFile = ?", arguments: [file])
                }
                let what = p.meditation ?? p.file
                done.append(tr("removed the entry for \(what) (its file \(p.file) is gone)", "Eintrag für \(what) entfernt (seine Datei \(p.file) fehlt)"))
            case .strayFile:
                for folder in [meditationsFolder, soundsFolder] where access(folder + "/" + p.file, F_OK) == 0 {
                    done.append(try moveToLostAndFound(folder + "/" + p.file, why: tr("not a file the store made", "keine Datei, die die Bibliothek angelegt hat")))
                }
            case .sizeMismatch, .hashMismatch:
                done.append(tr("left \(p.description); import the original again to replace the copy",
                               "belassen: \(p.description); importiere das Original noch einmal, um die Kopie zu ersetzen"))
            case .orphanFile, .damagedRow:
                break
            }
        }
        done += try adoptOrphans(keeping: keep)
        let indexed = try indexMP3s()
        if indexed > 0 {
            done.append(tr("stored the frame index of \(indexed) MP3 meditation(s) (a start or seek far into them reads less)",
                           "den Frame-Index von \(indexed) MP3-Meditation(en) gespeichert (ein Start oder Sprung weit hinein liest weniger)"))
        }
        return done
    }

    /// Stores the frame index of each MPEG meditation that has none (imported before it was
    /// kept, or adopted): a scan of its frame headers. Returns how many.
    func indexMP3s() throws(CoreError) -> Int {
        var count = 0
        for m in try unindexedMeditations() where try storeIndex(of: m) { count += 1 }
        return count
    }

    /// The meditations with no stored frame index: MP3s imported before it was kept or
    /// adopted, and every M4A (whose sample table is its index).
    public func unindexedMeditations() throws(CoreError) -> [Meditation] {
        let missing = Set(try read { db in
            try String.fetchAll(db, sql: "SELECT id FROM meditation WHERE id NOT IN (SELECT meditationID FROM seekIndex)")
        })
        return try catalogRows().meditations.filter { missing.contains($0.id) }
    }

    /// Scans an MPEG meditation's frame headers and stores its index, if it is still in the
    /// catalog (a `delete` does not take the catalog lock a repair holds). By content, not
    /// by name: an adopted file keeps the name it had. False for anything else (an M4A,
    /// a file that cannot be read).
    public func storeIndex(of m: Meditation) throws(CoreError) -> Bool {
        guard let file = try? AudioFile(path: path(of: m)), let probe = try? MPEGProbe.probe(file),
              let index = MP3Decoder.scanIndex(file, probe: probe, knownFrames: m.durationFrames) else { return false }
        let id = m.id
        return try write { db -> Bool in
            guard try Int.fetchOne(db, sql: "SELECT count(*) FROM meditation WHERE id = ?", arguments: [id]) == 1 else {
                return false
            }
            try LibraryStore.saveSeekIndex(index, for: id, db)
            return true
        }
    }

    /// Adopts every unlocked `<UUID>.<ext>` in Meditations/ that no row names: probed,
    /// measured and cataloged under its own id; unreadable ones go to Lost+Found/.
    func adoptOrphans(keeping known: [String: DamagedRow]) throws(CoreError) -> [String] {
        var done: [String] = []
        let named = Set(try read { db in try String.fetchAll(db, sql: "SELECT storedFile FROM meditation") })
        for name in Self.list(meditationsFolder) where StoredName.isMeditation(name) && !named.contains(name) {
            if let line = try adopt(name, keeping: known[name]) { done.append(line) }
        }
        return done
    }

    /// Adopts one file (held locked meanwhile, so a running import is never disturbed).
    func adopt(_ name: String, keeping old: DamagedRow?) throws(CoreError) -> String? {
        let path = meditationsFolder + "/" + name
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            return try moveToLostAndFound(path, why: tr("not a regular file", "keine gewöhnliche Datei"))
        }
        // Busy: an import is renaming it into place right now.
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return nil }
        let id = String(name.prefix(36))
        let already = try read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM meditation WHERE storedFile = ? OR id = ?", arguments: [name, id]) ?? 0
        }
        guard already == 0 else { return nil }
        // A file sync knows: the record deleted (here or on another device) is not brought
        // back; a live one comes back as the journal has it, when the content is its own.
        let synced = try read { db -> (deleted: Bool, row: Meditation?)? in
            guard let fields = try SyncJournal.records(db, .meditation, ids: [id])[id] else { return nil }
            return (SyncJournal.isDeleted(fields), SyncMeditations.row(id, fields))
        }
        if let synced, synced.deleted {
            return try moveToLostAndFound(path, why: tr("its meditation was deleted", "ihre Meditation wurde gelöscht"))
        }
        if let row = synced?.row, row.storedFile == name, row.size == Int64(st.st_size), (try? ContentHash.of(file: path)) == row.contentHash {
            try write { db in try row.insert(db) }
            let shown = (row.teacher.isEmpty ? "" : row.teacher + " – ") + row.name
            return tr("adopted \(name) back into the library as \(shown)", "\(name) wieder in die Bibliothek aufgenommen als \(shown)")
        }
        let analysis: AudioAnalysis
        var tags: (title: String?, artist: String?, album: String?) = (nil, nil, nil)
        let hash: String
        do {
            let file = try AudioFile(path: path)
            let container = try AudioContainer.detect(file)
            let decoder = try Importer.openDecoder(file, container)
            if let mp3 = decoder as? MP3Decoder { tags = mp3.tags() }
            if let aac = decoder as? AACDecoder { tags = (aac.tags.title, aac.tags.artist, aac.tags.album) }
            try decoder.seek(toFrame: 0)
            analysis = try AudioAnalysis.run(decoder)
            hash = try ContentHash.of(file: path)
        } catch {
            let reason = (error as? AudioError)?.text() ?? "\(error)"
            return try moveToLostAndFound(path, why: tr("it cannot be read: \(reason)", "sie ist nicht lesbar: \(reason)"))
        }
        guard analysis.frames > 0, Meditation.sampleRates.contains(analysis.sampleRate) else {
            return try moveToLostAndFound(path, why: tr("no playable audio in it", "kein abspielbarer Ton darin"))
        }
        if let twin = try read({ db in
            try String.fetchOne(db, sql: "SELECT name FROM meditation WHERE contentHash = ?", arguments: [hash])
        }) {
            return try moveToLostAndFound(path, why: tr("a second copy of \(twin)", "eine zweite Kopie von \(twin)"))
        }
        let added = Date(timeIntervalSince1970: Double(st.st_mtim.tv_sec))
        let m = Meditation(
            id: id, storedFile: name, originalName: name, durationFrames: analysis.frames,
            sampleRate: analysis.sampleRate,
            teacher: Importer.clean(old?.teacher) ?? Importer.clean(tags.artist) ?? "",
            name: Importer.clean(old?.name) ?? Importer.clean(tags.title) ?? tr("Recovered \(id.prefix(8))", "Wiederhergestellt \(id.prefix(8))"),
            album: Importer.clean(old?.album) ?? Importer.clean(tags.album), dateAdded: added,
            trimStart: nil, trimEnd: nil, startGong: nil, endGong: nil, size: Int64(st.st_size),
            contentHash: hash, loudnessGain: analysis.gain, lastPosition: nil)
        try write { db in
            try m.insert(db)
            // A file sync knows already keeps the record it has (its name from a peer).
            if try SyncJournal.records(db, .meditation, ids: [m.id])[m.id] == nil { try SyncMeditations.record(db, m) }
        }
        let shown = (m.teacher.isEmpty ? "" : m.teacher + " – ") + m.name
        return tr("adopted \(name) back into the library as \(shown)", "\(name) wieder in die Bibliothek aufgenommen als \(shown)")
    }

    /// Moves a file out of the store's folders into `Lost+Found/` (never over another).
    func moveToLostAndFound(_ path: String, why: String) throws(CoreError) -> String {
        try Paths.makeFolder(lostAndFound)
        let base = String(path.split(separator: "/").last ?? "file")
        var target = lostAndFound + "/" + base
        var n = 1
        // link() never replaces a file: a name already taken tries the next one.
        while link(path, target) != 0 {
            guard errno == EEXIST, n < 1000 else {
                let reason = String(cString: strerror(errno))
                throw CoreError.io(path: path, reason: both("cannot move it to \(lostAndFound): \(reason)", "kann nicht nach \(lostAndFound) verschoben werden: \(reason)"))
            }
            n += 1
            target = lostAndFound + "/\(n)-" + base
        }
        unlink(path)
        Importer.syncFolder(lostAndFound)
        let file = Display.clean(base)
        return tr("moved \(file) to \(lostAndFound)/ (\(why))", "\(file) nach \(lostAndFound)/ verschoben (\(why))")
    }
}
