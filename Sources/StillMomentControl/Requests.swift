// The typed arguments of the control protocol's requests: read strictly from a request's
// `args` (an unknown key is refused naming it, every number range-checked before any
// conversion) and written by clients the same way.
import FoundationEssentials
import StillMomentAudio
import StillMomentCore

/// A request's arguments, read once, key by key: `finish()` refuses keys nobody asked for.
struct ArgumentReader {
    let command: ControlCommand
    private let args: [String: JSON]
    private var used: Set<String> = []

    init(_ command: ControlCommand, _ args: [String: JSON]) {
        self.command = command
        self.args = args
    }

    mutating func value(_ key: String) -> JSON? {
        used.insert(key)
        if case .null? = args[key] { return nil }
        return args[key]
    }

    mutating func string(_ key: String, limit: Int = 4096) throws(ProtocolError) -> String? {
        guard let v = value(key) else { return nil }
        guard let s = v.string, s.utf8.count <= limit else {
            throw ProtocolError(.badArguments, tr("\(key) must be a text of at most \(limit) bytes", "\(key) muss ein Text von höchstens \(limit) Bytes sein"))
        }
        return s
    }

    mutating func bool(_ key: String) throws(ProtocolError) -> Bool? {
        guard let v = value(key) else { return nil }
        guard case .bool(let b) = v else {
            throw ProtocolError(.badArguments, tr("\(key) must be true or false", "\(key) muss true oder false sein"))
        }
        return b
    }

    /// A whole number within ±`limit`, checked before it becomes an integer.
    mutating func integer(_ key: String, limit: Double) throws(ProtocolError) -> Int64? {
        guard let v = value(key) else { return nil }
        guard let n = v.number, n.isFinite, n == n.rounded(), abs(n) <= limit else {
            throw ProtocolError(.badArguments, tr("\(key) must be a whole number within ±\(Int64(limit))",
                                                  "\(key) muss eine ganze Zahl innerhalb von ±\(Int64(limit)) sein"))
        }
        return Int64(n)
    }

    /// Milliseconds within ±24 h.
    mutating func milliseconds(_ key: String) throws(ProtocolError) -> Int64? {
        guard let v = value(key) else { return nil }
        guard let n = v.number, n.isFinite, abs(n) <= 86_400_000 else {
            throw ProtocolError(.badArguments, tr("\(key) must be a number of milliseconds within ±86400000",
                                                  "\(key) muss eine Zahl von Millisekunden innerhalb von ±86400000 sein"))
        }
        return Int64(n)
    }

    /// Refuses the keys that were not read.
    func finish() throws(ProtocolError) {
        let unknown = Set(args.keys).subtracting(used).sorted()
        guard let first = unknown.first else { return }
        let known = used.sorted().joined(separator: ", ")
        let name = Display.clean(String(first.prefix(40)))
        throw ProtocolError(.badArguments, known.isEmpty
            ? tr("\(command.rawValue) takes no arguments, not '\(name)'", "\(command.rawValue) nimmt keine Argumente, nicht '\(name)'")
            : tr("unknown argument '\(name)' for \(command.rawValue); it takes: \(known)",
                 "unbekanntes Argument '\(name)' für \(command.rawValue); es nimmt: \(known)"))
    }
}

/// `timer`: a preset and/or timer options as text (`{"duration":"20m"}`), each parsed by
/// the one parser of its kind (TimerRequest); an unknown option is refused naming it.
public struct TimerStartRequest: Sendable, Equatable {
    public var preset: String?
    public var options: [String: String]

    public init(preset: String? = nil, options: [String: String] = [:]) {
        self.preset = preset
        self.options = options
    }

    public init(args: [String: JSON]) throws(ProtocolError) {
        var r = ArgumentReader(.timer, args)
        preset = try r.string("preset", limit: 256)
        options = [:]
        switch r.value("options") {
        case nil: break
        case .object(let o)?:
            for (k, v) in o {
                guard let text = v.string else {
                    throw ProtocolError(.badArguments, tr("option \(Display.clean(String(k.prefix(40)))) must be a text (\"20m\")",
                                                          "die Option \(Display.clean(String(k.prefix(40)))) muss ein Text sein (\"20m\")"))
                }
                options[k] = text
            }
        default:
            throw ProtocolError(.badArguments, tr("options must be an object of texts", "options muss ein Objekt aus Texten sein"))
        }
        try r.finish()
    }

    /// The typed options (an unknown key or a bad value refused).
    public func request() throws(CoreError) -> TimerRequest { try TimerRequest(text: options) }

    public var args: [String: JSON] {
        var a: [String: JSON] = [:]
        if let preset { a["preset"] = .string(preset) }
        if !options.isEmpty { a["options"] = .object(options.mapValues(JSON.string)) }
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

    public init(args: [String: JSON]) throws(ProtocolError) {
        var r = ArgumentReader(.play, args)
        guard let id = try r.string("id", limit: 1024) else {
            throw ProtocolError(.badArguments, tr("play needs {\"id\": \"UUID or name\"}", "play braucht {\"id\": \"UUID oder Name\"}"))
        }
        self.id = id
        from = try r.milliseconds("from")
        preparation = try r.milliseconds("preparation")
        resume = try r.bool("resume") ?? false
        preview = try r.bool("preview") ?? false
        if let text = try r.string("device", limit: 1024) {
            do { device = try DeviceName.parse(text, option: "device") } catch { throw ProtocolError(error) }
        } else {
            device = nil
        }
        try r.finish()
        guard (from ?? 0) >= 0, (preparation ?? 0) >= 0 else {
            throw ProtocolError(.badArguments, tr("from and preparation cannot be negative", "from und preparation können nicht negativ sein"))
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

    public init(args: [String: JSON]) throws(ProtocolError) {
        var r = ArgumentReader(.seek, args)
        let by = try r.milliseconds("by")
        let to = try r.milliseconds("to")
        let at = try r.integer("at", limit: Self.maxAt)
        try r.finish()
        switch (by, to) {
        case (let b?, nil): target = .by(b)
        case (nil, let t?) where t >= 0: target = .to(t)
        default:
            throw ProtocolError(.badArguments, tr("seek needs {\"by\": milliseconds} or {\"to\": milliseconds}",
                                                  "seek braucht {\"by\": Millisekunden} oder {\"to\": Millisekunden}"))
        }
        guard at.map({ $0 >= 0 }) ?? true else {
            throw ProtocolError(.badArguments, tr("at must be a time on the monotonic clock in µs, not negative",
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

/// `subscribe`: events, and progress once a second unless `progress` is false.
public struct SubscribeRequest: Sendable, Equatable {
    public var progress: Bool

    public init(progress: Bool = true) { self.progress = progress }

    public init(args: [String: JSON]) throws(ProtocolError) {
        var r = ArgumentReader(.subscribe, args)
        progress = try r.bool("progress") ?? true
        try r.finish()
    }
}

/// `ring-now`: a schedule entry by its id.
public struct RingNowRequest: Sendable, Equatable {
    public var id: Int64

    public init(args: [String: JSON]) throws(ProtocolError) {
        var r = ArgumentReader(.ringNow, args)
        guard let id = try r.integer("id", limit: 1e15) else {
            throw ProtocolError(.badArguments, tr("ring-now needs {\"id\": N}", "ring-now braucht {\"id\": N}"))
        }
        self.id = id
        try r.finish()
    }
}

/// A command that takes no arguments: any key is refused.
func noArguments(_ command: ControlCommand, _ args: [String: JSON]) throws(ProtocolError) {
    try ArgumentReader(command, args).finish()
}
