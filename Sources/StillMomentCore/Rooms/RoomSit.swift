// A sit in several rooms as it travels between nodes (retained at the broker's
// `<site>/sit/<id>`): one message is the whole state of the sit from an instant on, "from
// this CLOCK_REALTIME instant the sit is at this point of its timeline, playing (or
// paused, or stopped)", with the timer it runs. Every node in one of its rooms plays the
// same timeline, so the start, interval and end gongs fall on the same instant everywhere;
// a pause, resume or stop is a new state with a higher revision, for an instant a little
// ahead. Because each message says where the timeline is, a node that missed one, or joins
// late, or comes back after a restart, plays from the right point. The one reader of such a
// message, and the one place that decides what a node does with it.
import StillMomentAudio

public struct RoomSit: Sendable, Equatable {
    public enum Phase: String, Sendable, Codable {
        case playing, paused, stopped
    }

    public var id: String
    /// The node that started it.
    public var from: String
    public var rooms: RoomChoice
    /// Higher for each change of the sit (a node takes only the newest).
    public var revision: Int
    public var phase: Phase
    /// The instant (ms since 1970, CLOCK_REALTIME) from which this state holds.
    public var atMilliseconds: Int64
    /// Where the sit's timeline is at that instant (ms from its first frame).
    public var position: Int64
    /// The timer it runs: every option resolved by the node that started it (its settings,
    /// preset and options, the random bells' seed fixed), never a device: each node plays on
    /// its own.
    public var timer: TimerRequest

    /// The largest message read.
    public static let largest = 8192
    /// A state that comes with less time than this before its instant is joined a lead
    /// later, at the point its timeline has reached then (a device, kept open or not,
    /// needs up to 150 ms to be believed about its delay, output.c).
    public static let marginMilliseconds: Int64 = 200
    /// Revisions beyond this are refused (a sit is changed a few times, not millions).
    public static let mostRevisions = 100_000

    public init(id: String, from: String, rooms: RoomChoice, revision: Int, phase: Phase, atMilliseconds: Int64,
                position: Int64, timer: TimerRequest) throws(CoreError) {
        guard RoomRing.isPeerWord(id) else { throw Self.bad("id") }
        guard RoomRing.isPeerWord(from) else { throw Self.bad("from") }
        guard (1...Self.mostRevisions).contains(revision) else { throw Self.bad("rev") }
        guard atMilliseconds > 0, atMilliseconds < 100_000_000_000_000 else { throw Self.bad("at") }
        guard position >= 0, position <= TimerConfiguration.maxDuration + TimerConfiguration.maxPreparation + 600_000 else {
            throw Self.bad("position")
        }
        guard timer.device == nil else { throw Self.bad("timer") }
        self.id = id
        self.from = from
        self.rooms = rooms
        self.revision = revision
        self.phase = phase
        self.atMilliseconds = atMilliseconds
        self.position = position
        self.timer = timer
    }

    private struct Wire: Codable {
        var v: Int
        var id: String
        var from: String
        var rooms: String
        var rev: Int
        var phase: String
        var at: Int64
        var position: Int64
        var timer: [String: String]
    }

    /// The message's text (one JSON object).
    public var payload: String {
        JSON(encoding: Wire(v: 1, id: id, from: from, rooms: rooms.description, rev: revision, phase: phase.rawValue,
                            at: atMilliseconds, position: position, timer: timer.text)).line
    }

    /// Reads a peer's message: at most `largest` bytes of one JSON object, every field
    /// present and in range, the timer's options through the one parser of each (a device
    /// among them is refused: a peer never names what this node opens).
    public init(payload bytes: [UInt8]) throws(CoreError) {
        guard bytes.count <= Self.largest else { throw Self.bad("size") }
        let w: Wire
        do throws(JSONValueDecoder.Failure) { w = try JSON.decode(Wire.self, from: bytes) } catch {
            throw CoreError.badRequest(both("a sit message that is not one: \(error.description)",
                                            "eine Sitzungs-Nachricht, die keine ist: \(error.description)"))
        }
        guard w.v == 1 else { throw Self.bad("v") }
        guard let phase = Phase(rawValue: w.phase) else { throw Self.bad("phase") }
        guard w.timer.count <= TimerOption.allCases.count, w.timer["device"] == nil else { throw Self.bad("timer") }
        let timer: TimerRequest
        do throws(CoreError) { timer = try TimerRequest(text: w.timer) } catch {
            throw CoreError.badRequest(both("a sit message with a bad timer: \(error.text(.en))",
                                            "eine Sitzungs-Nachricht mit ungültigem Timer: \(error.text(.de))"))
        }
        try self.init(id: w.id, from: w.from, rooms: try RoomChoice(parsing: w.rooms), revision: w.rev, phase: phase,
                      atMilliseconds: w.at, position: w.position, timer: timer)
    }

    /// Where the timeline is at `instant` (ms, CLOCK_REALTIME): it moves while playing and
    /// stands while paused or stopped.
    public func position(at instant: Int64) -> Int64 {
        phase == .playing ? max(0, position + (instant - atMilliseconds)) : position
    }

    /// The next state of this sit: `phase` from `instant` on, its position carried there.
    public func next(_ phase: Phase, at instant: Int64) throws(CoreError) -> RoomSit {
        try RoomSit(id: id, from: from, rooms: rooms, revision: revision + 1, phase: phase, atMilliseconds: instant,
                    position: position(at: instant), timer: timer)
    }

    /// What a node in `room` does with this state, given what it plays of this sit
    /// (`local`), at `nowMilliseconds` (CLOCK_REALTIME), its clock as `clock` says, `lead` ms
    /// being what it needs to start in time. `length`: the sit's timeline in ms (nil: open).
    public func step(room: RoomName?, local: LocalSit, clock: ClockState, boundMilliseconds: Int,
                     nowMilliseconds now: Int64, lead: Int64, length: Int64?) -> SitStep {
        let here = room.map { rooms.includes($0) } ?? false
        let ahead = atMilliseconds - now
        if ahead > RoomRing.horizonMilliseconds { return .tooFar(milliseconds: ahead) }
        guard here else { return local == .none ? .notHere : .stop(atMilliseconds: max(now, atMilliseconds)) }
        switch phase {
        case .stopped:
            return local == .none ? .nothing : .stop(atMilliseconds: max(now, atMilliseconds))
        case .paused:
            return local == .playing ? .pause(atMilliseconds: max(now, atMilliseconds), position: position) : .nothing
        case .playing:
            if local == .playing { return .nothing }
            // Late (the message was slow, or this node joins a sit under way): a new instant
            // a lead ahead, at the point the timeline will have reached then. In time: its own
            // instant, when there are `margin` ms left to make the device ready.
            let instant = ahead >= Self.marginMilliseconds ? atMilliseconds : now + lead
            let from = position(at: instant)
            if let length, from >= length { return .over }
            guard clock.fit(boundMilliseconds: boundMilliseconds) else { return .clockUnfit(clock) }
            return local == .paused
                ? .resume(atMilliseconds: instant, position: from)
                : .start(atMilliseconds: instant, position: from, late: instant - atMilliseconds)
        }
    }

    private static func bad(_ field: String) -> CoreError {
        CoreError.badRequest(both("a sit message with a bad '\(field)'", "eine Sitzungs-Nachricht mit ungültigem '\(field)'"))
    }
}

/// What a node plays of a sit in several rooms.
public enum LocalSit: Sendable, Equatable {
    case none, playing, paused
}

/// What a node does with a sit's state.
public enum SitStep: Sendable, Equatable {
    /// Starts the timer so that its timeline is at `position` at the instant (late: how
    /// many ms after the sit's own instant, when it joins late).
    case start(atMilliseconds: Int64, position: Int64, late: Int64)
    /// Pauses at the instant (the timeline stands at `position`).
    case pause(atMilliseconds: Int64, position: Int64)
    /// Goes on from `position`, heard at the instant.
    case resume(atMilliseconds: Int64, position: Int64)
    /// Ends its part of the sit at the instant.
    case stop(atMilliseconds: Int64)
    /// Nothing to do (it plays this state already, or it is not its).
    case nothing
    case notHere
    /// The sit is over by the time this node could join.
    case over
    case tooFar(milliseconds: Int64)
    case clockUnfit(ClockState)

    /// One line for the log.
    public func text(_ sit: RoomSit) -> String {
        let head = "sit \(sit.id) from \(sit.from) (revision \(sit.revision), \(sit.phase.rawValue))"
        switch self {
        case .start(let at, let p, let late):
            return late > 0 ? "\(head): joins at \(p) ms of its timeline, at \(at) (\(late) ms after its instant)"
                : "\(head): starts at \(at)"
        case .pause(let at, let p): return "\(head): pauses at \(at) (at \(p) ms)"
        case .resume(let at, let p): return "\(head): resumes at \(at) from \(p) ms"
        case .stop(let at): return "\(head): stops at \(at)"
        case .nothing: return "\(head): nothing to do"
        case .notHere: return "\(head) is for \(sit.rooms), not this room"
        case .over: return "\(head) is over: not joined"
        case .tooFar(let ms): return "\(head) is \(ms) ms ahead (more than a minute): refused"
        case .clockUnfit(let c):
            return c.synchronised
                ? "\(head): this node's clock is off by up to \(c.estimatedErrorMicroseconds / 1000) ms: left out"
                : "\(head): this node's clock is not synchronised: left out"
        }
    }
}
