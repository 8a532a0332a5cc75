// The typed messages of the control protocol: status, events, error codes and end reasons,
// shared by the daemon, the clients (CLI, web) and the tests. The wire form is JSON; these
// types are the one definition of its shape.
import FoundationEssentials
import StillMomentAudio
import StillMomentCore

/// What kind of session plays: the protocol's name for `SessionKind` (the same strings).
public typealias SessionSource = SessionKind

/// The phase of the session playing (or `idle`). A timer goes preparation, startGong,
/// running, endGong; a guided meditation preparation, startGong, playing; `starting` while
/// the device is handed over from the session before.
public enum Phase: String, Codable, Sendable, CaseIterable {
    case idle, starting, preparation, startGong, running, endGong, completed, stopped, playing, bell
}

/// How a session ended, as the protocol names it.
public enum EndReasonName: String, Codable, Sendable, CaseIterable {
    case completed, finished, stopped, replaced, preempted, failed
}

/// A session that ended: the `ended` event's data and the status's `lastEnded`.
public struct Ended: Codable, Sendable, Equatable {
    public var session: Int
    public var source: SessionSource
    public var reason: EndReasonName
    /// The source that took the device (`preempted`).
    public var by: SessionSource?
    /// What failed (`failed`), in the daemon's words.
    public var message: LocalizedText?
    /// Whether a failure was the sound device's (the CLI exits 3 for it).
    public var code: ErrorCode?
    /// A guided meditation's file position (ms).
    public var position: Int64?

    public init(session: Int, source: SessionSource, reason: EndReasonName, by: SessionSource? = nil,
                message: LocalizedText? = nil, code: ErrorCode? = nil, position: Int64? = nil) {
        self.session = session
        self.source = source
        self.reason = reason
        self.by = by
        self.message = message
        self.code = code
        self.position = position
    }
}

/// The status of the daemon: what plays, and what is kept for later.
public struct Status: Codable, Sendable, Equatable {
    public struct Section: Codable, Sendable, Equatable {
        public var index: Int
        public var kind: StillMomentCore.Section.Kind
        public var remaining: Int64
        public var count: Int
        public init(index: Int, kind: StillMomentCore.Section.Kind, remaining: Int64, count: Int) {
            self.index = index
            self.kind = kind
            self.remaining = remaining
            self.count = count
        }
    }
    public struct MeditationRef: Codable, Sendable, Equatable {
        public var id: String
        public var name: String
        public var teacher: String
        public init(id: String, name: String, teacher: String) {
            self.id = id
            self.name = name
            self.teacher = teacher
        }
    }
    /// A guided meditation a timer paused, kept to be resumed.
    public struct Suspended: Codable, Sendable, Equatable {
        public var id: String
        public var name: String
        public var position: Int64
        public init(id: String, name: String, position: Int64) {
            self.id = id
            self.name = name
            self.position = position
        }
    }
    /// The next entry of the schedule.
    public struct NextScheduled: Codable, Sendable, Equatable {
        public var id: Int64
        /// Local date and time, ISO 8601 without a zone.
        public var at: String
        public var when: String
        public var action: String
        public var name: String?
        public init(id: Int64, at: String, when: String, action: String, name: String?) {
            self.id = id
            self.at = at
            self.when = when
            self.action = action
            self.name = name
        }
    }

    public var state: Phase
    public var session: Int?
    public var source: SessionSource?
    /// Paused (asked for: the fade to silence may still be under way).
    public var paused: Bool?
    // The output's counters: underruns = xruns the device reported + silences we wrote
    // because the ring ran dry.
    public var underruns: Int?
    public var xruns: Int?
    public var silences: Int?
    public var realtime: Bool?
    public var device: String?
    /// Where the session's last pause went, as the output thread tells it (a diagnosis:
    /// `hw/measure.py` reads it).
    public var lastPause: PauseTiming?
    // A timer (ms).
    public var elapsed: Int64?
    public var remaining: Int64?
    public var duration: Int64?
    /// An open-ended sit (no `remaining`).
    public var open: Bool?
    public var section: Section?
    /// Time of the next gong from the meditation's start (ms).
    public var nextGong: Int64?
    // A guided meditation.
    /// Time until the voice begins, during the preparation and the start gong (ms).
    public var startsIn: Int64?
    public var meditation: MeditationRef?
    public var position: Int64?
    /// A seek is under way: `position` is where it goes.
    public var seeking: Bool?
    // A bell.
    public var sound: String?
    // Always.
    public var suspended: Suspended?
    public var lastEnded: Ended?
    public var nextScheduled: NextScheduled?
    /// The device kept open between sessions (output-standby), while nothing plays.
    public var keptOpen: KeptOpen?
    public struct KeptOpen: Codable, Sendable, Equatable {
        public var device: String
        /// Frames handed to the device since it was opened (its silence included): it grows
        /// while the device runs.
        public var framesWritten: UInt64
        public init(device: String, framesWritten: UInt64) {
            self.device = device
            self.framesWritten = framesWritten
        }
    }

    /// The MQTT link to Home Assistant, while MQTT is on (`mqtt status`).
    public var mqtt: MQTTLink?
    public struct MQTTLink: Codable, Sendable, Equatable {
        public var broker: String
        public var node: String
        public var connected: Bool
        public init(broker: String, node: String, connected: Bool) {
            self.broker = broker
            self.node = node
            self.connected = connected
        }
    }

    /// This node's room (nil: none) and its clock (`status`, `rooms`).
    public var room: String?
    public var clock: ClockState?
    /// The nodes the broker knows (the answer to `rooms`; this node among them).
    public var nodes: [RoomNode]?
    /// A ring sent to several rooms (the answer to `ring --rooms`).
    public var rang: Rang?
    public struct Rang: Codable, Sendable, Equatable {
        public var id: String
        public var bell: String
        /// The instant, ms since 1970.
        public var at: Int64
        public var rooms: String
        public init(id: String, bell: String, at: Int64, rooms: String) {
            self.id = id
            self.bell = bell
            self.at = at
            self.rooms = rooms
        }
    }

    public init(state: Phase) { self.state = state }

    public var isPaused: Bool { paused == true }
    public var isIdle: Bool { state == .idle }
}

/// What the daemon sends to subscribers unasked.
public enum Event: Sendable, Equatable {
    /// The state changed (a phase, pause, a new session).
    case state(Status)
    /// Once a second while a session plays, to subscribers that asked for progress.
    case progress(Status)
    case ended(Ended)

    public var name: String {
        switch self {
        case .state: return "state"
        case .progress: return "progress"
        case .ended: return "ended"
        }
    }
}

extension Event: Codable {
    private enum Keys: String, CodingKey { case event, data }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        switch try c.decode(String.self, forKey: .event) {
        case "state": self = .state(try c.decode(Status.self, forKey: .data))
        case "progress": self = .progress(try c.decode(Status.self, forKey: .data))
        case "ended": self = .ended(try c.decode(Ended.self, forKey: .data))
        case let other:
            throw DecodingError.dataCorruptedError(forKey: .event, in: c, debugDescription: "unknown event '\(other)'")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(name, forKey: .event)
        switch self {
        case .state(let s), .progress(let s): try c.encode(s, forKey: .data)
        case .ended(let e): try c.encode(e, forKey: .data)
        }
    }
}

extension EndReason {
    /// The protocol's name of the reason.
    public var wireName: EndReasonName { EndReasonName(rawValue: name) ?? .failed }
}
