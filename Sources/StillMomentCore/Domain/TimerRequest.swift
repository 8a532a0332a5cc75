/// What a timer is asked to be, as types: every option a typed field. The CLI's flags,
/// the settings file and the control socket all turn their text into this through one
/// parser per kind of value (`TimerOption.parse`); an unknown key is an error that names
/// it. `TimerConfiguration(request:catalog:)` then checks it against the sounds.
import StillMomentAudio

/// The timer's options, named as on the command line and in `settings.json`.
public enum TimerOption: String, CaseIterable, Sendable, Codable {
    case duration, preparation, gong
    case gongVolume = "gong-volume"
    case strikes, interval
    case intervalLength = "interval-length"
    case intervalMode = "interval-mode"
    case intervalGong = "interval-gong"
    case intervalVolume = "interval-volume"
    case bells, ambience
    case ambienceVolume = "ambience-volume"
    case device
    case sections
    case sectionGong = "section-gong"
    case sectionStrikes = "section-strikes"
    case randomBells = "random-bells"
    case seed
    case ambienceDuring = "ambience-during"
    case open

    /// The kinds of value, each with one parser.
    public enum Kind: Sendable {
        case time, optionalTime, volume, soundID, count, mode, interval, bells, device
        case sections, strikePair, range, seed, during, flag
    }

    public var kind: Kind {
        switch self {
        case .duration, .intervalLength: return .time
        case .preparation: return .optionalTime
        case .gongVolume, .intervalVolume, .ambienceVolume: return .volume
        case .gong, .intervalGong, .ambience: return .soundID
        case .strikes: return .count
        case .intervalMode: return .mode
        case .interval: return .interval
        case .bells: return .bells
        case .device: return .device
        case .sections: return .sections
        case .sectionGong: return .soundID
        case .sectionStrikes: return .strikePair
        case .randomBells: return .range
        case .seed: return .seed
        case .ambienceDuring: return .during
        case .open: return .flag
        }
    }

    /// Options that are kept as settings (the others are for one sit only).
    public var isSetting: Bool { ![.bells, .sections, .randomBells, .seed, .open].contains(self) }

    public var flag: String { "--" + rawValue }

    /// Finds the option for a key, or says which keys there are.
    public static func named(_ key: String) throws(CoreError) -> TimerOption {
        guard let option = TimerOption(rawValue: key) else {
            throw CoreError.badValue(option: "", reason: both(
                "unknown option '\(Display.clean(String(key.prefix(40))))'; the options are: \(allCases.map(\.rawValue).joined(separator: ", "))",
                "unbekannte Option '\(Display.clean(String(key.prefix(40))))'; es gibt: \(allCases.map(\.rawValue).joined(separator: ", "))"))
        }
        return option
    }
}

/// Interval gongs: off, on (at the stored length), or every given time.
public enum IntervalSetting: Sendable, Equatable, Codable {
    case off, on
    case every(Int64)
}

/// How often the section gong is struck into a walk and back into a sit (`2,1`).
public struct SectionStrikes: Sendable, Equatable, Codable {
    public var intoWalk: Int
    public var intoSit: Int
    public init(intoWalk: Int, intoSit: Int) {
        self.intoWalk = intoWalk
        self.intoSit = intoSit
    }
}

/// A bell of `--bells`: a time from the start, or before the end.
public struct BellTime: Sendable, Equatable, Codable {
    public var fromEnd: Bool
    public var milliseconds: Int64
    public init(fromEnd: Bool, milliseconds: Int64) {
        self.fromEnd = fromEnd
        self.milliseconds = milliseconds
    }
}

public struct TimerRequest: Sendable, Equatable, Codable {
    public var duration: Int64?
    /// 0 = no preparation.
    public var preparation: Int64?
    public var gong: String?
    public var gongVolume: Double?
    public var strikes: Int?
    public var interval: IntervalSetting?
    public var intervalLength: Int64?
    public var intervalMode: IntervalMode?
    public var intervalGong: String?
    public var intervalVolume: Double?
    public var bells: [BellTime]?
    public var ambience: String?
    public var ambienceVolume: Double?
    public var device: DeviceName?
    public var sections: Sections?
    public var sectionGong: String?
    public var sectionStrikes: SectionStrikes?
    public var randomBells: RandomBells?
    public var seed: UInt64?
    /// false: the ambience only while sitting.
    public var ambienceDuringWalks: Bool?
    public var open: Bool?

    public init() {}

    /// Parses text keyed by option names (flags, settings, the socket's text form).
    public init(text: [String: String]) throws(CoreError) {
        for (key, value) in text.sorted(by: { $0.key < $1.key }) {
            try set(try TimerOption.named(key), text: value)
        }
    }

    /// Sets one option from its text, through the parser of its kind.
    public mutating func set(_ option: TimerOption, text: String) throws(CoreError) {
        let parsed = try TimerValue.parse(text, as: option)
        switch (option, parsed) {
        case (.duration, .time(let v)): duration = v
        case (.intervalLength, .time(let v)): intervalLength = v
        case (.preparation, .time(let v)): preparation = v
        case (.gongVolume, .volume(let v)): gongVolume = v
        case (.intervalVolume, .volume(let v)): intervalVolume = v
        case (.ambienceVolume, .volume(let v)): ambienceVolume = v
        case (.gong, .text(let v)): gong = v
        case (.intervalGong, .text(let v)): intervalGong = v
        case (.ambience, .text(let v)): ambience = v
        case (.device, .device(let v)): device = v
        case (.strikes, .count(let v)): strikes = v
        case (.intervalMode, .mode(let v)): intervalMode = v
        case (.interval, .interval(let v)): interval = v
        case (.bells, .bells(let v)): bells = v
        case (.sections, .sections(let v)): sections = v
        case (.sectionGong, .text(let v)): sectionGong = v
        case (.sectionStrikes, .strikes(let v)): sectionStrikes = v
        case (.randomBells, .range(let v)): randomBells = v
        case (.seed, .seed(let v)): seed = v
        case (.ambienceDuring, .flag(let v)): ambienceDuringWalks = v
        case (.open, .flag(let v)): open = v
        default: throw CoreError.badValue(option: option.flag, reason: both("'\(text)' is not a value of this option", "'\(text)' ist kein Wert dieser Option"))
        }
    }

    /// This request with every option `other` sets taken from `other`.
    public func overlaid(by other: TimerRequest) -> TimerRequest {
        var r = self
        r.duration = other.duration ?? duration
        r.preparation = other.preparation ?? preparation
        r.gong = other.gong ?? gong
        r.gongVolume = other.gongVolume ?? gongVolume
        r.strikes = other.strikes ?? strikes
        r.interval = other.interval ?? interval
        r.intervalLength = other.intervalLength ?? intervalLength
        r.intervalMode = other.intervalMode ?? intervalMode
        r.intervalGong = other.intervalGong ?? intervalGong
        r.intervalVolume = other.intervalVolume ?? intervalVolume
        r.bells = other.bells ?? bells
        r.ambience = other.ambience ?? ambience
        r.ambienceVolume = other.ambienceVolume ?? ambienceVolume
        r.device = other.device ?? device
        r.sections = other.sections ?? sections
        r.sectionGong = other.sectionGong ?? sectionGong
        r.sectionStrikes = other.sectionStrikes ?? sectionStrikes
        r.randomBells = other.randomBells ?? randomBells
        r.seed = other.seed ?? seed
        r.ambienceDuringWalks = other.ambienceDuringWalks ?? ambienceDuringWalks
        r.open = other.open ?? open
        return r
    }

    /// The options this request sets, as they would be typed (keyed like the options;
    /// `TimerRequest(text:)` reads them back to the same request): a preset's listing, and
    /// a sit in several rooms as it travels between nodes.
    public var text: [String: String] {
        var o: [String: String] = [:]
        func time(_ ms: Int64?) -> String? { ms.map(TimeText.compact) }
        func volume(_ v: Double?) -> String? { v.map { String($0) } }
        o["duration"] = time(duration)
        o["preparation"] = preparation.map { $0 == 0 ? "off" : TimeText.compact($0) }
        o["gong"] = gong
        o["gong-volume"] = volume(gongVolume)
        o["strikes"] = strikes.map(String.init)
        switch interval {
        case .off?: o["interval"] = "off"
        case .on?: o["interval"] = "on"
        case .every(let ms)?: o["interval"] = TimeText.compact(ms)
        case nil: break
        }
        o["interval-length"] = time(intervalLength)
        o["interval-mode"] = intervalMode?.rawValue
        o["interval-gong"] = intervalGong
        o["interval-volume"] = volume(intervalVolume)
        o["bells"] = bells.map { $0.map { ($0.fromEnd ? "-" : "") + TimeText.compact($0.milliseconds) }.joined(separator: ",") }
        o["sections"] = sections?.description
        o["section-gong"] = sectionGong
        o["section-strikes"] = sectionStrikes.map { "\($0.intoWalk),\($0.intoSit)" }
        o["random-bells"] = randomBells.map { "\(TimeText.compact($0.minimum))-\(TimeText.compact($0.maximum))" }
        o["seed"] = seed.map { String($0) }
        o["ambience"] = ambience
        o["ambience-volume"] = volume(ambienceVolume)
        o["ambience-during"] = ambienceDuringWalks.map { $0 ? "all" : "sit" }
        o["device"] = device?.text
        o["open"] = open.map { $0 ? "yes" : "no" }
        return o
    }

    /// The app's defaults (Settings.defaults, parsed).
    public static var defaults: TimerRequest {
        var r = TimerRequest()
        for (key, value) in Settings.defaults {
            if let option = TimerOption(rawValue: key) { try? r.set(option, text: value) }
        }
        return r
    }
}

/// One parsed value, by kind.
public enum TimerValue: Sendable, Equatable {
    case time(Int64), volume(Double), text(String), device(DeviceName), count(Int), mode(IntervalMode), interval(IntervalSetting), bells([BellTime])
    case sections(Sections), strikes(SectionStrikes), range(RandomBells), seed(UInt64), flag(Bool)

    static let offWords: Set<String> = ["off", "none", "no", "0"]

    /// The one parser per kind of value, used by the CLI, the settings file and the socket.
    public static func parse(_ raw: String, as option: TimerOption) throws(CoreError) -> TimerValue {
        let text = raw.trimmingWhitespace()
        func time(_ t: String) throws(CoreError) -> Int64 {
            do { return try TimeText.parse(t) } catch { throw CoreError.badValue(option: option.flag, reason: .rendering { error.description }) }
        }
        switch option.kind {
        case .time:
            return .time(try time(text))
        case .optionalTime:
            return .time(offWords.contains(text.lowercased()) ? 0 : try time(text))
        case .volume:
            guard let v = TimeText.decimal(Substring(text)), v >= 0, v <= 1 else {
                throw CoreError.badValue(option: option.flag, reason: both("'\(text)' is not a volume from 0 to 1 (for example 0.5)", "'\(text)' ist keine Lautstärke von 0 bis 1 (zum Beispiel 0.5)"))
            }
            return .volume(v)
        case .soundID:
            guard !text.isEmpty, text.count <= 100, !text.unicodeScalars.contains(where: Display.isControl) else {
                throw CoreError.badValue(option: option.flag, reason: both("'\(text)' is not a sound id (see `stillmoment sounds`)", "'\(text)' ist kein Klang (siehe `stillmoment sounds`)"))
            }
            return .text(text)
        case .device:
            return .device(try DeviceName.parse(text, option: option.flag))
        case .count:
            guard text.count <= 2, let n = Int(text), (1...9).contains(n) else {
                throw CoreError.badValue(option: option.flag, reason: both("'\(text)' is not a number from 1 to 9", "'\(text)' ist keine Zahl von 1 bis 9"))
            }
            return .count(n)
        case .mode:
            guard let mode = IntervalMode(rawValue: text.lowercased()) else {
                throw CoreError.badValue(option: option.flag, reason: both("'\(text)' is not one of repeating, after-start, before-end", "'\(text)' ist keines von repeating, after-start, before-end"))
            }
            return .mode(mode)
        case .interval:
            let lower = text.lowercased()
            if offWords.contains(lower) { return .interval(.off) }
            if lower == "on" || lower == "yes" { return .interval(.on) }
            return .interval(.every(try time(text)))
        case .bells:
            guard text.utf8.count <= 200_000 else {
                throw CoreError.badValue(option: option.flag, reason: both("more than \(GongSchedule.maxBells) times", "mehr als \(GongSchedule.maxBells) Zeiten"))
            }
            var list: [BellTime] = []
            for item in text.split(separator: ",", omittingEmptySubsequences: false) {
                let word = String(item).trimmingWhitespace()
                guard !word.isEmpty else { throw CoreError.badValue(option: option.flag, reason: both("an empty time in '\(text)'", "eine leere Zeit in '\(text)'")) }
                guard list.count < GongSchedule.maxBells else {
                    throw CoreError.badValue(option: option.flag, reason: both("more than \(GongSchedule.maxBells) times", "mehr als \(GongSchedule.maxBells) Zeiten"))
                }
                let parsed: (fromEnd: Bool, ms: Int64)
                do { parsed = try TimeText.parseSigned(word) } catch {
                    throw CoreError.badValue(option: option.flag, reason: .rendering { error.description })
                }
                list.append(BellTime(fromEnd: parsed.fromEnd, milliseconds: parsed.ms))
            }
            guard !list.isEmpty else { throw CoreError.badValue(option: option.flag, reason: both("no times given", "keine Zeiten angegeben")) }
            return .bells(list)
        case .sections:
            return .sections(try Sections(parsing: text))
        case .strikePair:
            let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { Int(String($0).trimmingWhitespace()) }
            guard (1...2).contains(parts.count), parts.allSatisfy({ $0.map { (1...9).contains($0) } ?? false }),
                  let walk = parts.first ?? nil, let sit = parts.last ?? nil else {
                throw CoreError.badValue(option: option.flag, reason: both("'\(text)' is not N or WALK,SIT strikes from 1 to 9 (for example 2,1)", "'\(text)' ist nicht N oder GEHEN,SITZEN Schläge von 1 bis 9 (zum Beispiel 2,1)"))
            }
            return .strikes(SectionStrikes(intoWalk: walk, intoSit: sit))
        case .range:
            return .range(try RandomBells(parsing: text))
        case .seed:
            guard text.count <= 20, let v = UInt64(text) else {
                throw CoreError.badValue(option: option.flag, reason: both("'\(text)' is not a whole number from 0 to 18446744073709551615", "'\(text)' ist keine ganze Zahl von 0 bis 18446744073709551615"))
            }
            return .seed(v)
        case .during:
            switch text.lowercased() {
            case "all", "always", "walk", "walks": return .flag(true)
            case "sit", "sits", "sitting": return .flag(false)
            default: throw CoreError.badValue(option: option.flag, reason: both("'\(text)' is not all or sit", "'\(text)' ist weder all noch sit"))
            }
        case .flag:
            switch text.lowercased() {
            case "yes", "on", "true", "1": return .flag(true)
            case "no", "off", "false", "0": return .flag(false)
            default: throw CoreError.badValue(option: option.flag, reason: both("'\(text)' is not yes or no", "'\(text)' ist weder yes noch no"))
            }
        }
    }
}
