// A schedule entry for several rooms as it travels between nodes: retained on the broker at
// `stillmoment-site/<site>/timetable/<uuid>` by the node that made it, copied into every
// other node's own schedule, so that each rings it from its copy at its instant even with
// the broker or the network gone. Bells only (the nodes share the instant, never a stream).
// The one reader of such a message: bounded and range-checked as a ring is.

public struct RoomTimetableEntry: Sendable, Equatable {
    public var uuid: String
    /// The node that made it (and keeps it on the broker).
    public var from: String
    public var when: ScheduleWhen
    public var bell: String
    public var strikes: Int
    public var volume: Double
    public var rooms: RoomChoice
    public var name: String?
    public var enabled: Bool

    public static let largest = 2048

    public init(uuid: String, from: String, when: ScheduleWhen, bell: String, strikes: Int, volume: Double,
                rooms: RoomChoice, name: String?, enabled: Bool) throws(CoreError) {
        guard RoomRing.isPeerWord(uuid, most: 64), RoomRing.isPeerWord(from, most: 64), RoomRing.isPeerWord(bell, most: 64) else {
            throw CoreError.badRequest(both("a timetable entry with a bad id, node or bell", "ein Zeitplaneintrag mit ungültiger Kennung, Knoten oder Glocke"))
        }
        guard (1...9).contains(strikes), volume >= 0, volume <= 1 else {
            throw CoreError.badRequest(both("a timetable entry with strikes or volume out of range", "ein Zeitplaneintrag mit Schlägen oder Lautstärke außerhalb der Grenzen"))
        }
        self.uuid = uuid
        self.from = from
        self.when = when
        self.bell = bell
        self.strikes = strikes
        self.volume = volume
        self.rooms = rooms
        self.name = try name.map { n throws(CoreError) in try ScheduleStore.checkName(n) }
        self.enabled = enabled
    }

    /// A node's own entry for rooms, as it publishes it (nil: not a bell for rooms).
    public init?(_ entry: ScheduleEntry, from node: String) {
        guard let rooms = entry.rooms, let uuid = entry.uuid, case .bell(let sound, let strikes, let volume) = entry.action,
              let made = try? RoomTimetableEntry(uuid: uuid, from: node, when: entry.when, bell: sound, strikes: strikes,
                                                 volume: volume, rooms: rooms, name: entry.name, enabled: entry.enabled) else { return nil }
        self = made
    }

    private struct Wire: Codable {
        var v: Int
        var uuid: String
        var from: String
        var when: String
        var bell: String
        var strikes: Int
        var volume: Double
        var rooms: String
        var name: String?
        var enabled: Bool
    }

    public var payload: String {
        JSON(encoding: Wire(v: 1, uuid: uuid, from: from, when: when.description, bell: bell, strikes: strikes, volume: volume,
                            rooms: rooms.description, name: name, enabled: enabled)).line
    }

    public init(payload bytes: [UInt8]) throws(CoreError) {
        guard bytes.count <= Self.largest else {
            throw CoreError.badRequest(both("a timetable entry over 2 KiB", "ein Zeitplaneintrag über 2 KiB"))
        }
        let w: Wire
        do throws(JSONValueDecoder.Failure) { w = try JSON.decode(Wire.self, from: bytes) } catch {
            throw CoreError.badRequest(both("a timetable entry that is not one: \(error.description)",
                                            "ein Zeitplaneintrag, der keiner ist: \(error.description)"))
        }
        guard w.v == 1 else { throw CoreError.badRequest(both("a timetable entry of another version", "ein Zeitplaneintrag einer anderen Version")) }
        try self.init(uuid: w.uuid, from: w.from, when: try ScheduleWhen(parsing: w.when), bell: w.bell, strikes: w.strikes,
                      volume: w.volume, rooms: try RoomChoice(parsing: w.rooms), name: w.name, enabled: w.enabled)
    }
}
