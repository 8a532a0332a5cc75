/// The stored MP3s' frame indexes (StillMomentAudio's SeekIndex), one row per meditation,
/// written with its catalog row at the import and read when it plays. An optimisation
/// only: a row that is missing (a meditation imported before there were any), cannot be
/// read or does not fit its file is no index, and the decoder reads its way as before.
import FoundationEssentials
import GRDB
import StillMomentAudio

extension LibraryStore {
    static func createSeekIndexTable(_ db: Database) throws {
        try db.create(table: "seekIndex") { t in
            t.primaryKey("meditationID", .text).references("meditation", onDelete: .cascade)
            t.column("step", .integer).notNull()
            t.column("offsets", .blob).notNull()
        }
    }

    /// Stores `index` for the meditation `id` (inside the import's transaction).
    static func saveSeekIndex(_ index: SeekIndex, for id: String, _ db: Database) throws {
        try db.execute(sql: "INSERT OR REPLACE INTO seekIndex (meditationID, step, offsets) VALUES (?, ?, ?)",
                       arguments: [id, index.step, Data(index.bytes)])
    }

    /// The frame index stored for `m`, if there is one that fits its file.
    public func seekIndex(for m: Meditation) -> SeekIndex? {
        let id = m.id
        // Only a row whose values have the stored types and a size an index can have: GRDB's
        // subscripts trap on a value they cannot convert (a hand-edited or damaged row).
        let row: (Int64, [UInt8])? = try? read { db in
            guard let r = try Row.fetchOne(db, sql: """
                SELECT step, offsets FROM seekIndex WHERE meditationID = ?
                AND typeof(step) = 'integer' AND typeof(offsets) = 'blob' AND length(offsets) <= ?
                """, arguments: [id, SeekIndex.maxOffsets * 8]),
                  let step = r["step"] as Int64?, let data = r["offsets"] as Data? else { return nil }
            return (step, [UInt8](data))
        }
        guard let (step, bytes) = row else { return nil }
        return SeekIndex(step: step, bytes: bytes, fileSize: m.size)
    }
}
