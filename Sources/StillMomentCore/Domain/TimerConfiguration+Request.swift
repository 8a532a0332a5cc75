/// A timer configuration from a typed request: the defaults, then the settings, then
/// what this sit asks, checked against the sounds and the ranges. Sections, interval
/// gongs counted within each sit section, bells, random bells (drawn here, once, so the
/// plan, the render and the played session are the same) and open-ended sits.
extension TimerConfiguration {
    public init(request asked: TimerRequest, catalog: SoundCatalog) throws(CoreError) {
        let r = TimerRequest.defaults.overlaid(by: asked)
        guard var duration = r.duration, let preparation = r.preparation, let gongID = r.gong,
              let gongVolume = r.gongVolume, let strikes = r.strikes, let intervalGongID = r.intervalGong,
              let intervalVolume = r.intervalVolume, let mode = r.intervalMode, let ambienceID = r.ambience,
              let ambienceVolume = r.ambienceVolume, let device = r.device, let sectionGongID = r.sectionGong,
              let sectionStrikes = r.sectionStrikes
        else { throw CoreError.damaged(.same("the built-in timer defaults are incomplete")) }
        let open = asked.open ?? false
        if let sections = asked.sections {
            if asked.duration != nil {
                throw CoreError.badRequest(both("--sections replaces the duration: give one or the other", "--sections ersetzt die Dauer: gib nur eines an"))
            }
            if open { throw CoreError.badRequest(both("an open sit has no sections", "eine offene Sitzung hat keine Abschnitte")) }
            duration = sections.total
        } else if open {
            if asked.duration != nil {
                throw CoreError.badRequest(both("an open sit has no duration", "eine offene Sitzung hat keine Dauer"))
            }
            duration = Self.maxDuration
        }
        guard duration >= 1000 else {
            throw CoreError.badValue(option: "--duration", reason: both("\(TimeText.compact(duration)) is shorter than 1 s", "\(TimeText.compact(duration)) ist kürzer als 1 s"))
        }
        guard duration <= Self.maxDuration else {
            throw CoreError.badValue(option: "--duration", reason: both("\(TimeText.compact(duration)) is longer than 24 h", "\(TimeText.compact(duration)) ist länger als 24 h"))
        }
        guard preparation <= Self.maxPreparation else {
            throw CoreError.badValue(option: "--preparation", reason: both("\(TimeText.compact(preparation)) is longer than 1 h", "\(TimeText.compact(preparation)) ist länger als 1 h"))
        }
        self.duration = duration
        self.preparation = preparation
        self.gong = try catalog.gong(gongID)
        self.gongVolume = gongVolume
        self.strikes = strikes
        self.intervalGong = try catalog.gong(intervalGongID)
        self.intervalVolume = intervalVolume
        self.sections = asked.sections
        // The section gong is looked up only when it is used or given (a catalog without
        // the default one still runs plain sits).
        self.sectionGong = asked.sections != nil || asked.sectionGong != nil ? try catalog.gong(sectionGongID) : gong
        self.sectionStrikes = sectionStrikes
        self.openEnded = open
        self.ambienceDuringWalks = r.ambienceDuringWalks ?? true
        // Interval gongs and bells count within the sit sections (the whole sit without sections).
        let sits: [Range<Int64>] = asked.sections?.sitRanges ?? [0..<duration]
        bellsGiven = asked.bells != nil
        if let bells = asked.bells {
            do { intervalTimes = try GongSchedule.bellTimes(bells, duration: duration) } catch {
                throw CoreError.badValue(option: "", reason: .rendering { error.description })
            }
            if let outside = intervalTimes.first(where: { t in !sits.contains { $0.contains(t) } }) {
                throw CoreError.badValue(option: "--bells", reason: both("\(TimeText.compact(outside)) is not within a sit section", "\(TimeText.compact(outside)) liegt nicht in einem Sitz-Abschnitt"))
            }
        } else {
            switch r.interval ?? .off {
            case .off:
                intervalTimes = []
            case .on, .every:
                var length: Int64 = r.intervalLength ?? 300_000
                if case .every(let every) = r.interval { length = every }
                guard length >= Self.minInterval else {
                    throw CoreError.badValue(option: "--interval", reason: both("\(TimeText.compact(length)) is shorter than 10 s (interval gongs ring at most every 10 s)", "\(TimeText.compact(length)) ist kürzer als 10 s (Intervallgongs klingen höchstens alle 10 s)"))
                }
                intervalTimes = sits.flatMap { range in
                    GongSchedule.intervalTimes(duration: range.upperBound - range.lowerBound, interval: length, mode: mode)
                        .map { $0 + range.lowerBound }
                }
            }
        }
        randomBells = asked.randomBells
        if let bells = asked.randomBells {
            let seed = asked.seed ?? UInt64.random(in: 0...UInt64.max)
            var generator = SeededGenerator(seed: seed)
            self.seed = seed
            randomBellTimes = bells.times(in: sits, using: &generator)
        } else {
            seed = nil
            randomBellTimes = []
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
