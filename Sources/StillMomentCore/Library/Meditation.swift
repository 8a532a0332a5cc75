import FoundationEssentials
import GRDB

/// A guided meditation in the store: the catalog row.
public struct Meditation: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "meditation"

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

    public var duration: Double { Double(durationFrames) / Double(sampleRate) }
    public var durationMilliseconds: Int64 { durationFrames * 1000 / Int64(sampleRate) }
}

/// A sound imported by the user (a gong or an ambience), selectable in `timer`.
public struct CustomSound: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "customSound"
    public var id: String             // the id to use with --gong / --ambience
    public var storedFile: String     // in Sounds/ of the store
    public var kind: String           // gong or ambience
    public var name: String
    public var size: Int64
    public var contentHash: String
    public var dateAdded: Date
}
