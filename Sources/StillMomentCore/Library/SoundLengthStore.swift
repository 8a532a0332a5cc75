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

    /// Stores the length of the sound `id` (inside the import's transaction).
    static func saveSoundLength(_ frames: Int64, for id: String, _ db: Database) throws {
        try db.execute(sql: "UPDATE customSound SET frames = ? WHERE id = ?", arguments: [frames, id])
    }

    /// The most frames a file of `size` bytes can hold: no MPEG frame carries more than 48
    /// samples per byte (MPEG-2 layer III at 8 kbit/s, 24 kHz: 576 in 24 bytes).
    static func plausible(_ frames: Int64, size: Int64) -> Bool { frames > 0 && frames / 48 <= size }

    /// The stored lengths by sound id (only integers; GRDB's subscripts trap on a value they
    /// cannot convert); none when they cannot be read (a store opened read-only before v7).
    public func soundLengths() -> [String: Int64] {
        let rows: [(String, Int64)]? = try? read { db in
            try Row.fetchAll(db, sql: "SELECT id, frames FROM customSound WHERE typeof(id) = 'text' AND typeof(frames) = 'integer'")
                .compactMap { r in (r["id"] as String?).flatMap { id in (r["frames"] as Int64?).map { (id, $0) } } }
        }
        return Dictionary(rows ?? [], uniquingKeysWith: { first, _ in first })
    }

    /// The imported sounds with no stored length (imported before it was kept, or adopted).
    public func uncountedSounds() throws(CoreError) -> [CustomSound] {
        let lengths = soundLengths()
        return try customSounds().filter { lengths[$0.id] == nil }
    }

    /// Counts a sound's frames (a scan of an MP3's frame headers, an M4A's sample table) and
    /// stores them, if the sound is still in the catalog. False when it cannot be read.
    public func storeLength(of sound: CustomSound) throws(CoreError) -> Bool {
        let path = soundsFolder + "/" + (StoredName.isMeditation(sound.storedFile) ? sound.storedFile : ".invalid")
        guard let decoder = try? openDecoder(path: path), let frames = decoder.totalFrames,
              Self.plausible(frames, size: sound.size) else { return false }
        let id = sound.id
        return try write { db -> Bool in
            guard try Int.fetchOne(db, sql: "SELECT count(*) FROM customSound WHERE id = ?", arguments: [id]) == 1 else {
                return false
            }
            try Self.saveSoundLength(frames, for: id, db)
            return true
        }
    }
}
