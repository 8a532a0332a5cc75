// A ring in several rooms as it travels between nodes (the broker's `<site>/ring` topic):
// which bell, how many strikes, how loud, for which rooms, and the instant (real-time
// milliseconds) its first frame leaves every speaker. The one reader of such a message: a
// peer's text is bounded and range-checked here before anything acts on it, and what a
// node does with it (play it, or why not) is decided here too.
import StillMomentAudio

public struct RoomRing: Sendable, Equatable {
    /// An id, a node or a sound's id from a peer: 1 to `most` bytes of a–z, A–Z, 0–9, - and _
    /// (a topic level and a word in a log line; the one check of such words in rooms).
    public static func isPeerWord(_ s: String, most: Int = 64) -> Bool {
        !s.isEmpty && s.utf8.count <= most
            && s.unicodeScalars.allSatisfy { ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "-" || $0 == "_" }
    }

    public var id: String
    /// The node that sent it.
    public var from: String
    public var bell: String
    public var strikes: Int
    public var volume: Double
    /// The instant, in milliseconds since 1970 (CLOCK_REALTIME).
    public var atMilliseconds: Int64
    public var rooms: RoomChoice

    /// The largest message read (the broker's client drops longer ones before).
    public static let largest = 2048
    /// An instant further away than this either way is refused.
    public static let horizonMilliseconds: Int64 = 60_000

    public init(id: String, from: String, bell: String, strikes: Int, volume: Double, atMilliseconds: Int64,
                rooms: RoomChoice) throws(CoreError) {
        guard RoomRing.isPeerWord(id, most: 64) else { throw Self.bad("id") }
        guard RoomRing.isPeerWord(from, most: 64) else { throw Self.bad("from") }
        guard RoomRing.isPeerWord(bell, most: 64) else { throw Self.bad("bell") }
        guard (1...9).contains(strikes) else { throw Self.bad("strikes") }
        guard volume >= 0, volume <= 1 else { throw Self.bad("volume") }
        guard atMilliseconds > 0, atMilliseconds < 100_000_000_000_000 else { throw Self.bad("at") }
        self.id = id
        self.from = from
        self.bell = bell
        self.strikes = strikes
        self.volume = volume
        self.atMilliseconds = atMilliseconds
        self.rooms = rooms
    }

    private struct Wire: Codable {
        var v: Int
        var id: String
        var from: String
        var bell: String
        var strikes: Int
        var volume: Double
        var at: Int64
        var rooms: String
    }

    /// The message's text (one JSON object).
    public var payload: String {
        JSON(encoding: Wire(v: 1, id: id, from: from, bell: bell, strikes: strikes, volume: volume, at: atMilliseconds,
                            rooms: rooms.description)).line
    }

    /// Reads a peer's message: at most `largest` bytes of one JSON object with every field
    /// present and in range (keys it does not know are a newer node's, and let be).
    public init(payload bytes: [UInt8]) throws(CoreError) {
        guard bytes.count <= Self.largest else { throw Self.bad("size") }
        let w: Wire
        do throws(JSONValueDecoder.Failure) { w = try JSON.decode(Wire.self, from: bytes) } catch {
            throw CoreError.badRequest(both("a ring message that is not one: \(error.description)",
                                            "eine Ring-Nachricht, die keine ist: \(error.description)"))
        }
        guard w.v == 1 else { throw Self.bad("v") }
        try self.init(id: w.id, from: w.from, bell: w.bell, strikes: w.strikes, volume: w.volume, atMilliseconds: w.at,
                      rooms: try RoomChoice(parsing: w.rooms))
    }

    /// What a node in `room` does with it now (`nowMilliseconds`, CLOCK_REALTIME), its
    /// clock as `clock` says.
    public func verdict(room: RoomName?, clock: ClockState, boundMilliseconds: Int, nowMilliseconds: Int64) -> RingVerdict {
        guard let room, rooms.includes(room) else { return .notHere }
        let ahead = atMilliseconds - nowMilliseconds
        if ahead > Self.horizonMilliseconds { return .tooFar(milliseconds: ahead) }
        if ahead < 0 { return .late(milliseconds: -ahead) }
        guard clock.fit(boundMilliseconds: boundMilliseconds) else { return .clockUnfit(clock) }
        return .play
    }

    private static func bad(_ field: String) -> CoreError {
        CoreError.badRequest(both("a ring message with a bad '\(field)'", "eine Ring-Nachricht mit ungültigem '\(field)'"))
    }
}

/// What a node does with a ring.
public enum RingVerdict: Sendable, Equatable {
    /// For this room, in time, and the clock is fit: it plays at the instant.
    case play
    /// Not for this node's room (or the node names none).
    case notHere
    /// The instant has passed: nothing is played late.
    case late(milliseconds: Int64)
    /// More than a minute ahead: refused.
    case tooFar(milliseconds: Int64)
    /// The clock is not synchronised, or its error is beyond the bound: left out.
    case clockUnfit(ClockState)

    /// One line for the log.
    public func text(_ ring: RoomRing) -> String {
        switch self {
        case .play: "ring \(ring.id) from \(ring.from): \(ring.bell) at \(ring.atMilliseconds)"
        case .notHere: "ring \(ring.id) from \(ring.from) is for \(ring.rooms), not this room"
        case .late(let ms): "ring \(ring.id) from \(ring.from) came \(ms) ms after its instant: not played"
        case .tooFar(let ms): "ring \(ring.id) from \(ring.from) is \(ms) ms ahead (more than a minute): refused"
        case .clockUnfit(let c):
            c.synchronised
                ? "ring \(ring.id) from \(ring.from): this node's clock is off by up to \(c.estimatedErrorMicroseconds / 1000) ms: left out"
                : "ring \(ring.id) from \(ring.from): this node's clock is not synchronised: left out"
        }
    }
}
