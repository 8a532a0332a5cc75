/// A timer configuration from a typed request: the defaults, then the settings, then
/// what this sit asks, checked against the sounds and the ranges.
extension TimerConfiguration {
    public init(request asked: TimerRequest, catalog: SoundCatalog) throws(CoreError) {
        let r = TimerRequest.defaults.overlaid(by: asked)
        let de = Language.current == .de
        guard let duration = r.duration, let preparation = r.preparation, let gongID = r.gong,
              let gongVolume = r.gongVolume, let strikes = r.strikes, let intervalGongID = r.intervalGong,
              let intervalVolume = r.intervalVolume, let mode = r.intervalMode, let ambienceID = r.ambience,
              let ambienceVolume = r.ambienceVolume, let device = r.device
        else { throw CoreError.damaged("the built-in timer defaults are incomplete") }
        guard duration >= 1000 else {
            throw CoreError.badValue(option: "--duration", reason: de ? "\(TimeText.compact(duration)) ist kürzer als 1 s" : "\(TimeText.compact(duration)) is shorter than 1 s")
        }
        guard duration <= Self.maxDuration else {
            throw CoreError.badValue(option: "--duration", reason: de ? "\(TimeText.compact(duration)) ist länger als 24 h" : "\(TimeText.compact(duration)) is longer than 24 h")
        }
        guard preparation <= Self.maxPreparation else {
            throw CoreError.badValue(option: "--preparation", reason: de ? "\(TimeText.compact(preparation)) ist länger als 1 h" : "\(TimeText.compact(preparation)) is longer than 1 h")
        }
        self.duration = duration
        self.preparation = preparation
        self.gong = try catalog.gong(gongID)
        self.gongVolume = gongVolume
        self.strikes = strikes
        self.intervalGong = try catalog.gong(intervalGongID)
        self.intervalVolume = intervalVolume
        if let bells = asked.bells {
            do { intervalTimes = try GongSchedule.bellTimes(bells, duration: duration) } catch {
                throw CoreError.badValue(option: "", reason: error.description)
            }
        } else {
            switch r.interval ?? .off {
            case .off:
                intervalTimes = []
            case .on, .every:
                var length: Int64 = r.intervalLength ?? 300_000
                if case .every(let every) = r.interval { length = every }
                guard length >= Self.minInterval else {
                    throw CoreError.badValue(option: "--interval", reason: de
                        ? "\(TimeText.compact(length)) ist kürzer als 10 s (Intervallgongs klingen höchstens alle 10 s)"
                        : "\(TimeText.compact(length)) is shorter than 10 s (interval gongs ring at most every 10 s)")
                }
                intervalTimes = GongSchedule.intervalTimes(duration: duration, interval: length, mode: mode)
            }
        }
        if ["silent", "off"].contains(ambienceID.lowercased()) {
            ambience = nil
        } else {
            let sound = try catalog.ambience(ambienceID)
            ambience = sound.filename == nil ? nil : sound
        }
        self.ambienceVolume = ambienceVolume
        self.device = device
    }
}
