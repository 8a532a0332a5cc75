/// Imported sounds (gongs and ambiences) in the sync journal, so that a preset or a
/// meditation naming one plays it on every device. A sound is a record keyed by its stored
/// file's UUID with one field set once at import (its id as `timer --gong` takes it, kind,
/// name, content hash, size, container, length, when imported); its file follows by hash as
/// a meditation's does (`SyncFiles`). The table is a function of the journal: sounds in the
/// order they were made (the field's stamp, then the record id); one whose id is taken by an
/// earlier sound of the same content is the same sound and not shown twice; one whose id is
/// taken by other content (two devices imported two bells as "my-bell") shows as
/// `my-bell-2` everywhere; a bundled sound's id is never taken from a peer.
import FoundationEssentials
import Glibc
import GRDB

/// What a sound is, as its `sound` field carries it.
struct SyncSoundFacts: Sendable, Equatable, Codable {
    var id: String
    var kind: String
    var name: String
    var hash: String
    var size: Int64
    var ext: String
    var frames: Int64?
    /// ms since 1970
    var added: Int64

    /// The largest sound sync takes.
    static let maximumSize: Int64 = 512 << 20

    var damage: String? {
        guard !id.isEmpty, id.utf8.count <= 100, Importer.slug(id) == id else { return "its id is not one `sounds import` makes" }
        guard kind == "gong" || kind == "ambience" else { return "its kind is not gong or ambience" }
        guard !name.isEmpty, name.count <= 200, !name.unicodeScalars.contains(where: Display.isControl) else { return "its name is not one we keep" }
        guard SyncFileFacts.isHash(hash) else { return "its hash is not one the store makes" }
        guard (1...Self.maximumSize).contains(size) else { return "its size \(size) is out of range" }
        guard ext == "mp3" || ext == "m4a" else { return "its container is not mp3 or m4a" }
        if let frames, !LibraryStore.plausible(frames, size: size) { return "its length does not fit its size" }
        guard (0...253_402_300_799_000).contains(added) else { return "its import time is out of range" }
        return nil
    }
}

/// A sound this device knows of whose file is not here.
struct ArrivingSound: Sendable, Equatable {
    var record: String
    var hash: String
    var size: Int64
}

enum SyncSounds {
    /// Records a sound just imported (in the import's transaction).
    static func record(_ db: Database, _ s: CustomSound, frames: Int64?) throws {
        guard let record = recordID(s) else { return }
        let facts = SyncSoundFacts(id: s.id, kind: s.kind, name: s.name, hash: s.contentHash, size: s.size,
                                   ext: s.storedFile.hasSuffix(".m4a") ? "m4a" : "mp3", frames: frames,
                                   added: Int64((s.dateAdded.timeIntervalSince1970 * 1000).rounded()))
        try SyncJournal.record(db, .sound, id: record, fields: [("sound", JSON(encoding: facts).line)])
    }

    /// A stored sound's record id: its file's UUID.
    static func recordID(_ s: CustomSound) -> String? {
        guard StoredName.isMeditation(s.storedFile) else { return nil }
        return String(s.storedFile.prefix(36))
    }

    /// The catalog's migration: every imported sound there is, recorded.
    static func seed(_ db: Database) throws {
        let lengths = Dictionary(try Row.fetchAll(db, sql: "SELECT storedFile, frames FROM customSound WHERE typeof(frames) = 'integer'")
            .compactMap { r -> (String, Int64)? in (r["storedFile"] as String?).flatMap { f in (r["frames"] as Int64?).map { (f, $0) } } },
                                 uniquingKeysWith: { a, _ in a })
        for row in try Row.fetchAll(db, sql: "SELECT * FROM customSound") {
            guard let s = try? CustomSound(row: row), s.kind == "gong" || s.kind == "ambience" else { continue }
            try record(db, s, frames: lengths[s.storedFile].flatMap { LibraryStore.plausible($0, size: s.size) ? $0 : nil })
        }
    }

    static func check(_ c: SyncChange) throws(SyncError) {
        guard c.field == "sound", let facts = try? JSON.decode(SyncSoundFacts.self, from: c.value.utf8, strict: true) else {
            throw .refused(both("sound \(c.id) \(c.field): not what a sound is", "Klang \(c.id) \(c.field): keine Angabe eines Klangs"))
        }
        if let damage = facts.damage { throw .refused(both("sound \(c.id): \(damage)", "Klang \(c.id): \(damage)")) }
    }

    /// The sounds as the journal has them: (record, facts, the id shown), in the order they
    /// were imported (their facts' time, then the record id: both set once).
    static func wanted(_ db: Database) throws -> [(record: String, facts: SyncSoundFacts, id: String)] {
        let all = try SyncJournal.records(db, .sound)
        var live: [(record: String, facts: SyncSoundFacts)] = []
        for (record, fields) in all where !SyncJournal.isDeleted(fields) {
            guard let field = fields["sound"], let facts = try? JSON.decode(SyncSoundFacts.self, from: field.value.utf8),
                  facts.damage == nil else { continue }
            live.append((record, facts))
        }
        live.sort { ($0.facts.added, $0.record) < ($1.facts.added, $1.record) }
        // Ids no peer may take: the bundled sounds', and rows of no journal record at all.
        var taken: [String: String?] = [:]   // id → content hash (nil: not a peer's to share)
        for id in (try? SoundCatalog.bundled().sounds.map(\.id)) ?? [] { taken[id] = .some(nil) }
        for row in try Row.fetchAll(db, sql: "SELECT id, storedFile FROM customSound") {
            guard let id: String = row["id"], let file: String = row["storedFile"] else { continue }
            if all[String(file.prefix(36))] == nil { taken[id] = .some(nil) }
        }
        var next: [String: Int] = [:]   // the next suffix to try, by base id
        var out: [(record: String, facts: SyncSoundFacts, id: String)] = []
        for s in live {
            if let holder = taken[s.facts.id], holder == s.facts.hash { continue }   // the same sound again
            var id = s.facts.id
            var n = next[s.facts.id] ?? 2
            while taken[id] != nil && n < 10_000 {
                id = "\(s.facts.id.prefix(95))-\(n)"
                n += 1
            }
            next[s.facts.id] = n
            guard taken[id] == nil else { continue }
            taken[id] = .some(s.facts.hash)
            out.append((s.record, s.facts, id))
        }
        return out
    }

    /// Makes the table what the journal says: each wanted sound's row, its file linked from
    /// any file here of its content (`extra`: a whole, verified file just arrived); a sound
    /// whose content is not here waits (arriving). Rows of records no longer wanted, or shown
    /// under another id now, leave first (so no id is held twice); the files of those that
    /// go are moved (to Lost+Found, when no other sound holds the content) only after the
    /// transaction commits.
    static func apply(_ db: Database, folders: SyncFolders, extra: [String: (path: String, size: Int64)] = [:]) throws {
        let wanted = try wanted(db)
        let journal = try SyncJournal.records(db, .sound)
        var rows: [String: CustomSound] = [:]   // by stored file
        for row in try Row.fetchAll(db, sql: "SELECT * FROM customSound") {
            if let s = try? CustomSound(row: row) { rows[s.storedFile] = s }
        }
        // Where each content is here (a sound's or a meditation's file, or one just arrived).
        var source = extra
        for s in rows.values where StoredName.isMeditation(s.storedFile) && source[s.contentHash] == nil {
            source[s.contentHash] = (folders.sounds + "/" + s.storedFile, s.size)
        }
        for row in try Row.fetchAll(db, sql: "SELECT storedFile, contentHash, size FROM meditation") {
            if let f: String = row["storedFile"], let h: String = row["contentHash"], let size: Int64 = row["size"],
               StoredName.isMeditation(f), source[h] == nil {
                source[h] = (folders.meditations + "/" + f, size)
            }
        }
        let byFile = Dictionary(wanted.map { ("\($0.record).\($0.facts.ext)", $0) }, uniquingKeysWith: { a, _ in a })
        var leaving: [CustomSound] = []
        for (file, s) in rows {
            guard let record = recordID(s), journal[record] != nil else { continue }   // not sync's
            if let w = byFile[file] {
                // Kept: unless its id, name or kind is another now (it comes back below).
                // A record whose content is not this row's (a peer rewrote it) leaves it be.
                guard w.facts.hash == s.contentHash else { continue }
                if s.id == w.id && s.name == w.facts.name && s.kind == w.facts.kind { continue }
                try db.execute(sql: "DELETE FROM customSound WHERE storedFile = ?", arguments: [file])
                rows[file] = nil
                continue
            }
            try db.execute(sql: "DELETE FROM customSound WHERE storedFile = ?", arguments: [file])
            rows[file] = nil
            leaving.append(s)
        }
        for w in wanted {
            let file = "\(w.record).\(w.facts.ext)"
            guard rows[file] == nil else { continue }
            let target = folders.sounds + "/" + file
            if access(target, F_OK) != 0 {
                // Arriving, unless its content is here (of the size it declares).
                guard let from = source[w.facts.hash], from.size == w.facts.size else { continue }
                guard link(from.path, target) == 0 || errno == EEXIST else { continue }
            }
            let sound = CustomSound(id: w.id, storedFile: file, kind: w.facts.kind, name: w.facts.name, size: w.facts.size,
                                    contentHash: w.facts.hash, dateAdded: Date(timeIntervalSince1970: Double(w.facts.added) / 1000))
            try sound.insert(db)
            if let frames = w.facts.frames { try LibraryStore.saveSoundLength(frames, of: sound, db) }
            rows[file] = sound
        }
        // The files of sounds that left: gone where another sound holds the content, else kept in Lost+Found.
        let held = Set(rows.values.map(\.contentHash))
        let sounds = folders.sounds, lostAndFound = folders.lostAndFound
        for s in leaving {
            let path = sounds + "/" + s.storedFile, keep = !held.contains(s.contentHash)
            folders.afterCommit.add {
                if keep {
                    try? Paths.makeFolder(lostAndFound)
                    if link(path, lostAndFound + "/sound-" + s.storedFile) != 0 && errno != EEXIST { return }
                }
                unlink(path)
            }
        }
    }

    /// The sounds wanted here whose content is not.
    static func arriving(_ db: Database) throws -> [ArrivingSound] {
        let here = Set(try String.fetchAll(db, sql: "SELECT storedFile FROM customSound"))
        return try wanted(db).filter { !here.contains("\($0.record).\($0.facts.ext)") }
            .map { ArrivingSound(record: $0.record, hash: $0.facts.hash, size: $0.facts.size) }
    }
}
