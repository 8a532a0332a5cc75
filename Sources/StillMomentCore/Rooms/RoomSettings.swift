// The rooms' settings: the node's room (`room`, empty: in no room), the site whose rooms it
// shares (`room-site`: the topic prefix every node of one house or centre uses), a
// per-node calibration of its output's latency (`room-offset-ms`), and how far its clock's
// estimated error may go before it is left out of rings (`room-clock-bound-ms`).
// Registered at start-up like the front-ends' settings, checked by Core's parsers.
import StillMomentAudio

public struct RoomSettings: Sendable, Equatable {
    public var room: RoomName?
    public var site: RoomName
    /// Added to the device's reported delay (ms; positive: the speaker sounds later than the
    /// device says, so this node starts that much earlier).
    public var offsetMilliseconds: Double
    public var clockBoundMilliseconds: Int

    public static let keys = ["room", "room-site", "room-offset-ms", "room-clock-bound-ms"]
    /// How far ahead a ring's instant is put: enough for every node to hear of it and wake
    /// its output (a standby's device in a few ms, a closed one in tens).
    public static let leadMilliseconds: Int64 = 300

    public init(_ settings: Settings) throws(CoreError) {
        let room = settings.value("room")
        self.room = room.isEmpty ? nil : try RoomName(parsing: room)
        site = try RoomName(parsing: settings.value("room-site"))
        offsetMilliseconds = try Self.offset(settings.value("room-offset-ms"))
        clockBoundMilliseconds = try Self.bound(settings.value("room-clock-bound-ms"))
    }

    static func offset(_ text: String) throws(CoreError) -> Double {
        guard text.count <= 12, let v = Double(text), v.isFinite, v >= -500, v <= 500 else {
            throw CoreError.badValue(option: "room-offset-ms", reason: both(
                "'\(Display.clean(String(text.prefix(40))))' is not from -500 to 500 (ms)",
                "'\(Display.clean(String(text.prefix(40))))' liegt nicht zwischen -500 und 500 (ms)"))
        }
        return v
    }

    static func bound(_ text: String) throws(CoreError) -> Int {
        guard text.count <= 4, text.allSatisfy(\.isASCII), let v = Int(text), (1...1000).contains(v) else {
            throw CoreError.badValue(option: "room-clock-bound-ms", reason: both(
                "'\(Display.clean(String(text.prefix(40))))' is not from 1 to 1000 (ms)",
                "'\(Display.clean(String(text.prefix(40))))' liegt nicht zwischen 1 und 1000 (ms)"))
        }
        return v
    }

    /// Registers the settings (harmless when done twice): call it at the start of every
    /// process that reads the settings, as the front-ends' registrations.
    public static func register() {
        Settings.register(Settings.Registered("room", default: "") { v throws(CoreError) in
            if !v.isEmpty { _ = try RoomName(parsing: v) }
        })
        Settings.register(Settings.Registered("room-site", default: "home") { v throws(CoreError) in _ = try RoomName(parsing: v) })
        Settings.register(Settings.Registered("room-offset-ms", default: "0") { v throws(CoreError) in _ = try RoomSettings.offset(v) })
        Settings.register(Settings.Registered("room-clock-bound-ms", default: "2") { v throws(CoreError) in _ = try RoomSettings.bound(v) })
    }

    /// The monotonic moment at which this node's first frame must be written to be heard at
    /// the real-time instant `ms` (the device's own delay is the engine's to subtract).
    public func monotonicInstant(realtimeMilliseconds ms: Int64) -> UInt64 {
        let real = UInt64(max(0, ms)) * 1_000_000
        let mono = WallClock.monotonic(atRealtime: real)
        let offset = Int64(offsetMilliseconds * 1e6)
        return offset >= 0 ? mono - min(mono, UInt64(offset)) : mono + UInt64(-offset)
    }
}

/// A node as the others know it (its retained presence on the broker): its room, its
/// clock, its version; `online` from its availability, `seen` when last heard (ms, the
/// reader's real-time clock).
public struct RoomNode: Sendable, Equatable, Codable {
    public var node: String
    public var room: RoomName?
    public var clock: ClockState
    public var version: String
    public var online: Bool
    public var seen: Int64

    public init(node: String, room: RoomName?, clock: ClockState, version: String, online: Bool, seen: Int64) {
        self.node = node
        self.room = room
        self.clock = clock
        self.version = version
        self.online = online
        self.seen = seen
    }

    private struct Presence: Codable {
        var v: Int
        var room: String
        var synchronised: Bool
        var estimatedErrorMicroseconds: Int
        var maximumErrorMicroseconds: Int
        var version: String
    }

    /// The retained presence a node publishes about itself.
    public var presence: String {
        JSON(encoding: Presence(v: 1, room: room?.text ?? "", synchronised: clock.synchronised,
                                estimatedErrorMicroseconds: clock.estimatedErrorMicroseconds,
                                maximumErrorMicroseconds: clock.maximumErrorMicroseconds,
                                version: String(version.prefix(40)))).line
    }

    /// Reads a peer's presence (bounded and checked as a ring is); `node` comes from its topic.
    public init(node: String, presence bytes: [UInt8], seen: Int64) throws(CoreError) {
        guard bytes.count <= 1024 else { throw CoreError.badRequest(both("a presence over 1 KiB", "eine Anwesenheit über 1 KiB")) }
        let p: Presence
        do throws(JSONValueDecoder.Failure) { p = try JSON.decode(Presence.self, from: bytes) } catch {
            throw CoreError.badRequest(both("a presence that is not one: \(error.description)", "eine Anwesenheit, die keine ist: \(error.description)"))
        }
        guard p.v == 1, p.version.utf8.count <= 40, !p.version.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }),
              (0...100_000_000).contains(p.estimatedErrorMicroseconds), (0...100_000_000).contains(p.maximumErrorMicroseconds) else {
            throw CoreError.badRequest(both("a presence out of range", "eine Anwesenheit außerhalb der Grenzen"))
        }
        self.init(node: node, room: p.room.isEmpty ? nil : try RoomName(parsing: p.room),
                  clock: ClockState(synchronised: p.synchronised, estimatedErrorMicroseconds: p.estimatedErrorMicroseconds,
                                    maximumErrorMicroseconds: p.maximumErrorMicroseconds),
                  version: p.version, online: true, seen: seen)
    }
}
