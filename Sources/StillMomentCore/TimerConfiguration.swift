/// A timer session's settings, checked: what `stillmoment timer` runs.
public struct TimerConfiguration: Sendable, Equatable {
    public var duration: Int64            // ms, 1 s ... 24 h
    public var preparation: Int64         // ms, 0 = off
    public var gong: Sound
    public var gongVolume: Double
    public var strikes: Int
    /// Interval gongs (ms from the start gong), already placed; empty when off.
    public var intervalTimes: [Int64]
    public var intervalGong: Sound
    public var intervalVolume: Double
    public var ambience: Sound?           // nil = silent
    public var ambienceVolume: Double
    public var device: String

    public static let maxDuration: Int64 = 24 * 3_600_000
    /// Interval gongs at most every 10 s: a gong rings for several seconds, and a 24-h
    /// timer then has at most 8,640 of them.
    public static let minInterval: Int64 = 10_000
    /// Longest preparation.
    public static let maxPreparation: Int64 = 3_600_000

    /// Builds the configuration from the settings overlaid with command-line options
    /// (both as typed text, keyed like the options; `bells` is an option only).
    public init(settings: Settings, options: [String: String], catalog: SoundCatalog) throws(CoreError) {
        func value(_ key: String) -> String { options[key] ?? settings.value(key) }
        func time(_ key: String) throws(CoreError) -> Int64 {
            do { return try TimeText.parse(value(key)) } catch { throw CoreError.badValue(option: "--\(key)", reason: "\(error.description)") }
        }
        func volume(_ key: String) throws(CoreError) -> Double {
            let text = value(key)
            guard let v = Double(text), v >= 0, v <= 1 else {
                throw CoreError.badValue(option: "--\(key)", reason: "'\(text)' is not a volume from 0 to 1 (for example 0.5)")
            }
            return v
        }
        func isOff(_ key: String) -> Bool { ["off", "none", "no", "0"].contains(value(key).lowercased()) }

        duration = try time("duration")
        guard duration >= 1000 else {
            throw CoreError.badValue(option: "--duration", reason: "'\(value("duration"))' is shorter than 1 s")
        }
        guard duration <= Self.maxDuration else {
            throw CoreError.badValue(option: "--duration", reason: "'\(value("duration"))' is longer than 24 h")
        }
        preparation = isOff("preparation") ? 0 : try time("preparation")
        guard preparation <= Self.maxPreparation else {
            throw CoreError.badValue(option: "--preparation", reason: "'\(value("preparation"))' is longer than 1 h")
        }
        gong = try catalog.gong(value("gong"))
        gongVolume = try volume("gong-volume")
        guard let n = Int(value("strikes")), (1...9).contains(n) else {
            throw CoreError.badValue(option: "--strikes", reason: "'\(value("strikes"))' is not a number from 1 to 9")
        }
        strikes = n
        intervalGong = try catalog.gong(value("interval-gong"))
        intervalVolume = try volume("interval-volume")
        guard let mode = IntervalMode(rawValue: value("interval-mode").lowercased()) else {
            throw CoreError.badValue(option: "--interval-mode", reason: "'\(value("interval-mode"))' is not one of repeating, after-start, before-end")
        }
        if let bells = options["bells"] {
            do { intervalTimes = try GongSchedule.bellTimes(bells, duration: duration) } catch {
                throw CoreError.badValue(option: "", reason: error.description)
            }
        } else if isOff("interval") {
            intervalTimes = []
        } else {
            // `--interval 5m` turns interval gongs on; `--interval on` uses the stored length.
            let key = ["on", "yes"].contains(value("interval").lowercased()) ? "interval-length" : "interval"
            let length = try time(key)
            guard length >= Self.minInterval else {
                throw CoreError.badValue(option: "--interval", reason: "'\(value(key))' is shorter than 10 s (interval gongs ring at most every 10 s)")
            }
            intervalTimes = GongSchedule.intervalTimes(duration: duration, interval: length, mode: mode)
        }
        let ambienceID = value("ambience")
        if ambienceID.lowercased() == "silent" || ambienceID.lowercased() == "off" {
            ambience = nil
        } else {
            let sound = try catalog.ambience(ambienceID)
            ambience = sound.filename == nil ? nil : sound
        }
        ambienceVolume = try volume("ambience-volume")
        device = value("device")
        guard !device.isEmpty else { throw CoreError.badValue(option: "--device", reason: "the device name is empty (try `aplay -L`)") }
    }
}
