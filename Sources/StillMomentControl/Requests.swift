// The typed requests of the control protocol: `Request` is the one definition of every
// command and its arguments. Arguments are decoded strictly through Core's JSON decoder (an
// unknown key is refused naming it and the keys taken; every number range-checked before
// any conversion) and written by clients from the same types.
import FoundationEssentials
import StillMomentAudio
import StillMomentCore

/// What a client asks of the daemon.
public enum Request: Sendable, Equatable {
    case status, pause, resume, stop, reschedule, unsubscribe
    /// Ends a running timer now, with its end gong, as a completed sit.
    case finish
    case seek(SeekRequest)
    case timer(TimerStartRequest)
    case play(PlayRequest)
    /// Runs a schedule entry now, by its id.
    case ringNow(id: Int64)
    /// Events, and progress once a second unless `progress` is false.
    case subscribe(progress: Bool)
    /// A bell: here now, or in several rooms at one instant.
    case ring(RingRequest)
    /// The nodes the broker knows, with their rooms and clocks.
    case rooms

    public var command: ControlCommand {
        switch self {
        case .status: .status
        case .pause: .pause
        case .resume: .resume
        case .stop: .stop
        case .finish: .finish
        case .reschedule: .reschedule
        case .unsubscribe: .unsubscribe
        case .seek: .seek
        case .timer: .timer
        case .play: .play
        case .ringNow: .ringNow
        case .subscribe: .subscribe
        case .ring: .ring
        case .rooms: .rooms
        }
    }

    /// The arguments as they go on the wire.
    public var args: [String: JSON] {
        switch self {
        case .status, .pause, .resume, .stop, .finish, .reschedule, .unsubscribe, .rooms: [:]
        case .ring(let r): r.args
        case .seek(let r): r.args
        case .timer(let r): r.args
        case .play(let r): r.args
        case .ringNow(let id): ["id": .number(Double(id))]
        case .subscribe(let progress): progress ? [:] : ["progress": .bool(false)]
        }
    }

    /// Reads a command's arguments, strictly.
    public init(_ command: ControlCommand, args: [String: JSON]) throws(ProtocolError) {
        switch command {
        case .status: try Wire.decode(NoArguments.self, command, args); self = .status
        case .pause: try Wire.decode(NoArguments.self, command, args); self = .pause
        case .resume: try Wire.decode(NoArguments.self, command, args); self = .resume
        case .stop: try Wire.decode(NoArguments.self, command, args); self = .stop
        case .finish: try Wire.decode(NoArguments.self, command, args); self = .finish
        case .reschedule: try Wire.decode(NoArguments.self, command, args); self = .reschedule
        case .unsubscribe: try Wire.decode(NoArguments.self, command, args); self = .unsubscribe
        case .seek: self = .seek(try SeekRequest(args: args))
        case .timer: self = .timer(try TimerStartRequest(args: args))
        case .play: self = .play(try PlayRequest(args: args))
        case .ringNow:
            let w = try Wire.decode(RingNowArguments.self, command, args)
            guard let id = w.id else {
                throw ProtocolError(.badArguments, both("ring-now needs {\"id\": N}", "ring-now braucht {\"id\": N}"))
            }
            self = .ringNow(id: try Wire.integer(id, "id", limit: 1e15))
        case .subscribe:
            self = .subscribe(progress: try Wire.decode(SubscribeArguments.self, command, args).progress ?? true)
        case .ring: self = .ring(try RingRequest(args: args))
        case .rooms: try Wire.decode(NoArguments.self, command, args); self = .rooms
        }
    }
}

/// Opens the object so that the strict decoder sees every key in it as unknown.
private struct NoArguments: Decodable {
    private enum Keys: CodingKey {}
    init(from decoder: any Decoder) throws { _ = try decoder.container(keyedBy: Keys.self) }
}
private struct RingNowArguments: Decodable { var id: Double? }
private struct SubscribeArguments: Decodable { var progress: Bool? }

/// Arguments off the wire: decoded strictly, and the decoder's refusals in the client's words.
enum Wire {
    @discardableResult
    static func decode<T: Decodable>(_ type: T.Type, _ command: ControlCommand, _ args: [String: JSON]) throws(ProtocolError) -> T {
        do {
            return try JSONValueDecoder.decode(type, from: .object(args), strict: true)
        } catch {
            throw refusal(error, command)
        }
    }

    static func refusal(_ error: JSONValueDecoder.Failure, _ command: ControlCommand) -> ProtocolError {
        let key = Display.clean(String(error.where_.prefix(40)))
        switch error.reason {
        case .unknownKey(let unknown, let known):
            let name = Display.clean(String(unknown.prefix(40)))
            let takes = known.joined(separator: ", ")
            return ProtocolError(.badArguments, known.isEmpty
                ? both("\(command.rawValue) takes no arguments, not '\(name)'", "\(command.rawValue) nimmt keine Argumente, nicht '\(name)'")
                : both("unknown argument '\(name)' for \(command.rawValue); it takes: \(takes)",
                     "unbekanntes Argument '\(name)' für \(command.rawValue); es nimmt: \(takes)"),
                args: ["key": .string(name), "takes": .array(known.map(JSON.string))])
        case .wrongType(let expected):
            return ProtocolError(.badArguments, both("\(key) must be \(expected.en)", "\(key) muss \(expected.de) sein"),
                                 args: ["key": .string(key), "expected": .string(expected.rawValue)])
        case .missing:
            return ProtocolError(.badArguments, both("\(key) is missing", "\(key) fehlt"), args: ["key": .string(key)])
        case .outOfRange:
            return ProtocolError(.badArguments, both("\(key) is out of range", "\(key) liegt außerhalb des Bereichs"), args: ["key": .string(key)])
        case .refused(let why):
            return ProtocolError(.badArguments, .same("\(key): \(Display.clean(String(why.prefix(200))))"))
        }
    }

    /// A text of at most `limit` bytes.
    static func text(_ s: String?, _ key: String, limit: Int = 4096) throws(ProtocolError) -> String? {
        guard let s else { return nil }
        guard s.utf8.count <= limit else {
            throw ProtocolError(.badArguments, both("\(key) must be a text of at most \(limit) bytes", "\(key) muss ein Text von höchstens \(limit) Bytes sein"))
        }
        return s
    }

    /// A whole number within ±`limit`, checked before it becomes an integer.
    static func integer(_ n: Double, _ key: String, limit: Double) throws(ProtocolError) -> Int64 {
        guard n.isFinite, n == n.rounded(), abs(n) <= limit else {
            throw ProtocolError(.badArguments, both("\(key) must be a whole number within ±\(Int64(limit))",
                                                  "\(key) muss eine ganze Zahl innerhalb von ±\(Int64(limit)) sein"))
        }
        return Int64(n)
    }

    /// Milliseconds within ±24 h.
    static func milliseconds(_ n: Double?, _ key: String) throws(ProtocolError) -> Int64? {
        guard let n else { return nil }
        guard n.isFinite, abs(n) <= 86_400_000 else {
            throw ProtocolError(.badArguments, both("\(key) must be a number of milliseconds within ±86400000",
                                                  "\(key) muss eine Zahl von Millisekunden innerhalb von ±86400000 sein"))
        }
        return Int64(n)
    }
}

/// `timer`: a preset and/or timer options as text (`{"duration":"20m"}`), each parsed by
/// the one parser of its kind (TimerRequest); an unknown option is refused naming it.
public struct TimerStartRequest: Sendable, Equatable {
    public var preset: String?
    public var options: [String: String]
    /// A sit in several rooms: these rooms' nodes play it in step (through the broker).
    public var rooms: RoomChoice?

    public init(preset: String? = nil, options: [String: String] = [:], rooms: RoomChoice? = nil) {
        self.preset = preset
        self.options = options
        self.rooms = rooms
    }

    private struct Arguments: Decodable {
        var preset: String?
        var options: JSON?
        var rooms: String?
    }

    public init(args: [String: JSON]) throws(ProtocolError) {
        let w = try Wire.decode(Arguments.self, .timer, args)
        preset = try Wire.text(w.preset, "preset", limit: 256)
        do throws(CoreError) {
            rooms = try w.rooms.map { r throws(CoreError) in try RoomChoice(parsing: r) }
        } catch {
            throw ProtocolError(.badArguments, error.words)
        }
        options = [:]
        switch w.options {
        case nil, .null?: break
        case .object(let o)?:
            for (k, v) in o {
                guard let text = v.string else {
                    throw ProtocolError(.badArguments, both("option \(Display.clean(String(k.prefix(40)))) must be a text (\"20m\")",
                                                          "die Option \(Display.clean(String(k.prefix(40)))) muss ein Text sein (\"20m\")"))
                }
                options[k] = text
            }
        default:
            throw ProtocolError(.badArguments, both("options must be an object of texts", "options muss ein Objekt aus Texten sein"))
        }
    }

    /// The typed options (an unknown key or a bad value refused).
    public func request() throws(CoreError) -> TimerRequest { try TimerRequest(text: options) }

    public var args: [String: JSON] {
        var a: [String: JSON] = [:]
        if let preset { a["preset"] = .string(preset) }
        if !options.isEmpty { a["options"] = .object(options.mapValues(JSON.string)) }
        if let rooms { a["rooms"] = .string(rooms.description) }
        return a
    }
}

/// `play`: a meditation by id or name, where to start, and how.
public struct PlayRequest: Sendable, Equatable {
    public var id: String
    /// Start here in the meditation (ms from its trimmed start).
    public var from: Int64?
    /// Silence before the start gong (ms).
    public var preparation: Int64?
    /// Start where it last stopped.
    public var resume: Bool
    /// Ten seconds from the middle, no gongs.
    public var preview: Bool
    /// Checked by the one device-name parser when the request is read.
    public var device: DeviceName?

    public init(id: String, from: Int64? = nil, preparation: Int64? = nil, resume: Bool = false, preview: Bool = false,
                device: DeviceName? = nil) {
        self.id = id
        self.from = from
        self.preparation = preparation
        self.resume = resume
        self.preview = preview
        self.device = device
    }

    private struct Arguments: Decodable {
        var id: String?
        var from: Double?
        var preparation: Double?
        var resume: Bool?
        var preview: Bool?
        var device: String?
    }

    public init(args: [String: JSON]) throws(ProtocolError) {
        let w = try Wire.decode(Arguments.self, .play, args)
        guard let id = try Wire.text(w.id, "id", limit: 1024) else {
            throw ProtocolError(.badArguments, both("play needs {\"id\": \"UUID or name\"}", "play braucht {\"id\": \"UUID oder Name\"}"))
        }
        self.id = id
        from = try Wire.milliseconds(w.from, "from")
        preparation = try Wire.milliseconds(w.preparation, "preparation")
        resume = w.resume ?? false
        preview = w.preview ?? false
        if let text = try Wire.text(w.device, "device", limit: 1024) {
            do { device = try DeviceName.parse(text, option: "device") } catch { throw ProtocolError(error) }
        } else {
            device = nil
        }
        guard (from ?? 0) >= 0, (preparation ?? 0) >= 0 else {
            throw ProtocolError(.badArguments, both("from and preparation cannot be negative", "from und preparation können nicht negativ sein"))
        }
    }

    public var args: [String: JSON] {
        var a: [String: JSON] = ["id": .string(id)]
        if let from { a["from"] = .number(Double(from)) }
        if let preparation { a["preparation"] = .number(Double(preparation)) }
        if resume { a["resume"] = .bool(true) }
        if preview { a["preview"] = .bool(true) }
        if let device { a["device"] = .string(device.text) }
        return a
    }
}

/// `seek`: by a signed amount or to a position in the meditation (ms); `at`, from a client on
/// this machine: when its user asked (CLOCK_MONOTONIC in µs), so that a relative seek counts
/// from where the meditation was heard then, not when the request reached the daemon.
public struct SeekRequest: Sendable, Equatable {
    public enum Target: Sendable, Equatable {
        case by(Int64)
        case to(Int64)
    }

    public var target: Target
    public var at: Int64?

    public static func by(_ ms: Int64, at: Int64? = nil) -> SeekRequest { SeekRequest(target: .by(ms), at: at) }
    public static func to(_ ms: Int64, at: Int64? = nil) -> SeekRequest { SeekRequest(target: .to(ms), at: at) }

    /// Now, as `at` takes it (CLOCK_MONOTONIC in µs).
    public static func stampNow() -> Int64 { Int64(MonotonicClock.nanoseconds() / 1000) }

    public init(target: Target, at: Int64? = nil) {
        self.target = target
        self.at = at
    }

    /// The largest `at` taken: 2^53 µs (a JSON number holds every whole number below it).
    static let maxAt = 9_007_199_254_740_991.0

    private struct Arguments: Decodable {
        var by: Double?
        var to: Double?
        var at: Double?
    }

    public init(args: [String: JSON]) throws(ProtocolError) {
        let w = try Wire.decode(Arguments.self, .seek, args)
        let by = try Wire.milliseconds(w.by, "by")
        let to = try Wire.milliseconds(w.to, "to")
        let at = try w.at.map { n throws(ProtocolError) in try Wire.integer(n, "at", limit: Self.maxAt) }
        switch (by, to) {
        case (let b?, nil): target = .by(b)
        case (nil, let t?) where t >= 0: target = .to(t)
        default:
            throw ProtocolError(.badArguments, both("seek needs {\"by\": milliseconds} or {\"to\": milliseconds}",
                                                  "seek braucht {\"by\": Millisekunden} oder {\"to\": Millisekunden}"))
        }
        guard at.map({ $0 >= 0 }) ?? true else {
            throw ProtocolError(.badArguments, both("at must be a time on the monotonic clock in µs, not negative",
                                                  "at muss eine Zeit der monotonen Uhr in µs sein, nicht negativ"))
        }
        self.at = at
    }

    public var args: [String: JSON] {
        var a: [String: JSON]
        switch target {
        case .by(let ms): a = ["by": .number(Double(ms))]
        case .to(let ms): a = ["to": .number(Double(ms))]
        }
        if let at { a["at"] = .number(Double(at)) }
        return a
    }
}

/// A bell (`stillmoment ring BELL [--rooms LIST]`): the sound, strikes and volume (the
/// settings' gong, strikes and volume when not given), and the rooms (nil: here, now).
public struct RingRequest: Sendable, Equatable {
    public var bell: String?
    public var strikes: Int?
    public var volume: Double?
    public var rooms: RoomChoice?

    public init(bell: String? = nil, strikes: Int? = nil, volume: Double? = nil, rooms: RoomChoice? = nil) {
        self.bell = bell
        self.strikes = strikes
        self.volume = volume
        self.rooms = rooms
    }

    private struct Arguments: Decodable {
        var bell: String?
        var strikes: Double?
        var volume: Double?
        var rooms: String?
    }

    var args: [String: JSON] {
        var a: [String: JSON] = [:]
        if let bell { a["bell"] = .string(bell) }
        if let strikes { a["strikes"] = .number(Double(strikes)) }
        if let volume { a["volume"] = .number(volume) }
        if let rooms { a["rooms"] = .string(rooms.description) }
        return a
    }

    public init(args: [String: JSON]) throws(ProtocolError) {
        let w = try Wire.decode(Arguments.self, .ring, args)
        if let b = w.bell, b.isEmpty || b.utf8.count > 64 {
            throw ProtocolError(.badArguments, both("a bell's name has 1 to 64 characters", "der Name eines Klangs hat 1 bis 64 Zeichen"))
        }
        bell = w.bell
        strikes = try w.strikes.map { n throws(ProtocolError) in
            guard n.isFinite, n == n.rounded(), (1...9).contains(n) else {
                throw ProtocolError(.badArguments, both("strikes is from 1 to 9", "strikes liegt zwischen 1 und 9"))
            }
            return Int(n)
        }
        volume = try w.volume.map { v throws(ProtocolError) in
            guard v.isFinite, v >= 0, v <= 1 else {
                throw ProtocolError(.badArguments, both("volume is from 0 to 1", "volume liegt zwischen 0 und 1"))
            }
            return v
        }
        do throws(CoreError) {
            rooms = try w.rooms.map { r throws(CoreError) in try RoomChoice(parsing: r) }
        } catch {
            throw ProtocolError(.badArguments, error.words)
        }
    }
}
