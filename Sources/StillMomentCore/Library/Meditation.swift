import FoundationEssentials
import GRDB

/// A guided meditation in the store: the catalog row.
public struct Meditation: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "meditation"
    /// Dates read and written without ICU (SQLiteDate): the same stored text.
    public static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy {
        .custom(SQLiteDate.decode)
    }
    public static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy {
        .custom(SQLiteDate.encode)
    }

    public var id: String              // UUID, lower case
    public var storedFile: String      // "<UUID>.<ext>" in Meditations/
    public var originalName: String    // the imported file's name
    public var durationFrames: Int64   // what actually decodes, at sampleRate
    public var sampleRate: Int
    public var teacher: String
    public var name: String
    public var album: String?
    public var dateAdded: Date
    public var trimStart: Int64?       // ms
    public var trimEnd: Int64?         // ms
    public var startGong: String?      // a gong id; nil = off
    public var endGong: String?
    public var size: Int64             // bytes
    public var contentHash: String     // XXH3-128, hex
    public var loudnessGain: Double    // dB to -16 LUFS, limited by the true peak
    public var lastPosition: Int64?    // ms

    public var duration: Double { sampleRate > 0 ? Double(durationFrames) / Double(sampleRate) : 0 }
    /// The length in ms; rows are checked when read (`isSound`), and this never traps.
    public var durationMilliseconds: Int64 {
        guard sampleRate > 0, durationFrames > 0 else { return 0 }
        let (ms, overflow) = durationFrames.multipliedReportingOverflow(by: 1000)
        return overflow ? Int64.max / Int64(sampleRate) : ms / Int64(sampleRate)
    }

    /// Sample rates a stored file can have.
    public static let sampleRates: ClosedRange<Int> = 8_000...384_000
    /// The longest meditation the catalog takes (frames are checked against it).
    public static let maxMilliseconds: Int64 = 1000 * 3_600_000

    /// What is wrong with a row read from the catalog, or nil when it can be used: the
    /// catalog is input too (a restored backup, a hand edit, a damaged disk).
    public var damage: String? {
        guard StoredName.isMeditation(storedFile), storedFile.hasPrefix(id + ".") else {
            return "its file name '\(storedFile)' is not one the store makes"
        }
        guard Self.sampleRates.contains(sampleRate) else { return "its sample rate \(sampleRate) is impossible" }
        guard durationFrames >= 0, durationFrames / Int64(sampleRate) <= Self.maxMilliseconds / 1000 else {
            return "its length (\(durationFrames) frames) is impossible"
        }
        let length = durationMilliseconds
        for (label, value) in [("trim start", trimStart), ("trim end", trimEnd), ("last position", lastPosition)] {
            if let value, value < 0 || value > length { return "its \(label) (\(value) ms) is outside the meditation" }
        }
        if let trimStart, let trimEnd, trimStart >= trimEnd { return "its trim range is empty" }
        guard size >= 0, loudnessGain.isFinite, abs(loudnessGain) < 100 else { return "its size or loudness is impossible" }
        return nil
    }
}

extension Meditation {
    /// The text fields a user edits.
    public enum TextField: String, Sendable { case name, teacher, album }

    /// A name, teacher or album as the one rule for names takes it: 1 to 200 characters
    /// (an album may be empty or `off`: none). Every front-end that edits one calls this.
    public static func checked(_ raw: String, _ field: TextField, option: String? = nil) throws(CoreError) -> String? {
        if field == .album {
            let t = raw.trimmingWhitespace()
            if t.isEmpty || t.lowercased() == "off" { return nil }
        }
        return try Names.check(raw, option: option ?? field.rawValue, maxLength: 200)
    }
}

/// The names the store gives its files: `<UUID>.mp3` or `<UUID>.m4a`, lower case. Only
/// such names are resolved inside the store's folders, so no row can point elsewhere.
public enum StoredName {
    public static func isMeditation(_ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1] == "mp3" || parts[1] == "m4a" else { return false }
        return isUUID(parts[0])
    }

    /// A lower-case UUID in its 36-character form.
    static func isUUID(_ s: Substring) -> Bool {
        guard s.utf8.count == 36 else { return false }
        for (i, c) in s.utf8.enumerated() {
            if [8, 13, 18, 23].contains(i) {
                if c != UInt8(ascii: "-") { return false }
            } else if !((c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "f"))) {
                return false
            }
        }
        return true
    }
}

/// A sound imported by the user (a gong or an ambience), selectable in `timer`.
public struct CustomSound: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    /// Dates read and written without ICU (SQLiteDate): the same stored text.
    public static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy {
        .custom(SQLiteDate.decode)
    }
    public static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy {
        .custom(SQLiteDate.encode)
    }

    public static let databaseTableName = "customSound"
    public var id: String             // the id to use with --gong / --ambience
    public var storedFile: String     // in Sounds/ of the store
    public var kind: String           // gong or ambience
    public var name: String
    public var size: Int64
    public var contentHash: String
    public var dateAdded: Date
}
