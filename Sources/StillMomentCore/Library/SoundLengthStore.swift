// The imported sounds' lengths in frames as their decoder counted them at the import, kept
// in customSound.frames (migration v7): a session opens a long MP3 ambience without a Xing
// tag without scanning it to its end for its length at each start. An optimisation only:
// a sound imported before (NULL until the daemon's idle housekeeping counts it), a value
// of the wrong type or one no file of its size can hold is no length, and the sound is
// counted at the start as before.
import GRDB
import StillMomentAudio

extension LibraryStore {
    static func addSoundLengthColumn(_ db: Database) throws {
        try db.alter(table: "customSound") { t in t.add(column: "frames", .integer) }
    }

    /// Stores the length of `sound`'s file (inside the import's transaction, or for a row
    /// still holding that file and no length: a sound deleted and imported again under the
    /// same name meanwhile keeps its own).
    static func saveSoundLength(_ frames: Int64, of sound: CustomSound, _ db: Database) throws {
        try db.execute(sql: "UPDATE customSound SET frames = ? WHERE id = ? AND storedFile = ? AND frames IS NULL",
                       arguments: [frames, sound.id, sound.storedFile])
    }

    /// The most frames an MPEG file of `size` bytes can hold: 48 per byte, twice the most
    /// any MPEG audio frame carries (MPEG-2 layer III at 8 kbit/s, 24 kHz: 576 in 24 bytes).
    static func plausible(_ frames: Int64, size: Int64) -> Bool { frames > 0 && frames / 48 <= size }

    /// The stored lengths by stored file (only integers; GRDB's subscripts trap on a value
    /// they cannot convert); none when they cannot be read (a store opened read-only before v7).
    public func soundLengths() -> [String: Int64] {
        let rows: [(String, Int64)]? = try? read { db in
            try Row.fetchAll(db, sql: """
                SELECT storedFile, frames FROM customSound WHERE typeof(storedFile) = 'text' AND typeof(frames) = 'integer'
                """)
                .compactMap { r in (r["storedFile"] as String?).flatMap { f in (r["frames"] as Int64?).map { (f, $0) } } }
        }
        return Dictionary(rows ?? [], uniquingKeysWith: { first, _ in first })
    }

    /// The imported MP3 sounds with no stored length (imported before it was kept, or
    /// adopted); an M4A needs none (its sample table has it).
    public func uncountedSounds() throws(CoreError) -> [CustomSound] {
        let lengths = soundLengths()
        return try customSounds().filter { $0.storedFile.hasSuffix(".mp3") && lengths[$0.storedFile] == nil }
    }

    /// Counts an MP3 sound's frames (a scan of its frame headers; joined streams decoded)
    /// and stores them, if the row still holds that file with no length. False when it
    /// cannot be read or is no MP3.
    public func storeLength(of sound: CustomSound) throws(CoreError) -> Bool {
        let path = soundsFolder + "/" + (StoredName.isMeditation(sound.storedFile) ? sound.storedFile : ".invalid")
        guard let file = try? AudioFile(path: path), let probe = try? MPEGProbe.probe(file),
              let frames = (try? MP3Decoder(file: file, probe: probe))?.totalFrames,
              Self.plausible(frames, size: sound.size) else { return false }
        return try write { db -> Bool in
            try Self.saveSoundLength(frames, of: sound, db)
            return db.changesCount == 1
        }
    }
}
