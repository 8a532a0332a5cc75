/// The states of a timer session, as in the app.
public enum TimerState: String, Sendable, CaseIterable {
    case idle, preparation, startGong, running, endGong, completed, stopped

    public func name(_ language: Language = .current) -> String {
        switch (self, language) {
        case (.idle, .en): return "ready"
        case (.idle, .de): return "bereit"
        case (.preparation, .en): return "preparation"
        case (.preparation, .de): return "Vorbereitung"
        case (.startGong, .en): return "start gong"
        case (.startGong, .de): return "Startgong"
        case (.running, .en): return "meditation"
        case (.running, .de): return "Meditation"
        case (.endGong, .en): return "end gong"
        case (.endGong, .de): return "Schlussgong"
        case (.completed, .en): return "completed"
        case (.completed, .de): return "beendet"
        case (.stopped, .en): return "stopped"
        case (.stopped, .de): return "abgebrochen"
        }
    }
}

/// Why a gong sounds, in the plan (`timer --plan`).
public enum GongReason: String, Sendable, Codable, CaseIterable {
    case start, interval, bell, random, section, end
}

/// One gong of the plan: its frame on the session's timeline and its time from the
/// start gong, the sound and volume, and why.
public struct PlannedGong: Sendable, Equatable, Codable {
    public var frame: Int64
    public var milliseconds: Int64
    public var sound: String
    public var volume: Double
    public var reason: GongReason
}

/// Every frame of a timer session, worked out in advance from the configuration and
/// the lengths of the gong sounds: a pure value, tested without audio.
///
/// Preparation, then the start gong (the meditation time starts with its first strike),
/// the ambience from the end of the start gong with a 10-s fade-in, interval gongs,
/// section gongs at the boundaries of sit and walk sections (the first strike on the
/// boundary's frame), bells and random bells, and at zero the end gong while the
/// ambience fades out over 3 s. The session ends when the end gong has rung out.
public struct TimerPlan: Sendable, Equatable {
    public let rate: Int
    public let meditationStart: Int64        // frame of the first start strike
    public let meditationEnd: Int64          // frame of zero (the first end strike)
    public let startStrikes: [Int64]
    public let startGongEnd: Int64
    /// Interval gongs and `--bells` (frames).
    public let intervalGongs: [Int64]
    /// Random bells (frames).
    public let randomBells: [Int64]
    /// Strikes of the section gong at each boundary (frames).
    public let sectionStrikes: [Int64]
    public let endStrikes: [Int64]
    /// The first ambience segment (nil when silent); `ambienceSegments` has them all
    /// (one per sit section when the ambience rests during walks).
    public let ambience: AmbiencePlan?
    public let ambienceSegments: [AmbiencePlan]
    public let sections: Sections?
    /// Counts up with no end (the end gong is only the 24-h ceiling).
    public let openEnded: Bool
    public let total: Int64
    /// Every gong, in time order, with its reason.
    public let gongs: [PlannedGong]

    public struct AmbiencePlan: Sendable, Equatable {
        public let start: Int64
        public let fadeIn: Int64
        public let fadeOutStart: Int64
        public let fadeOut: Int64
    }

    public static let ambienceFadeIn: Int64 = 10_000   // ms
    public static let ambienceFadeOut: Int64 = 3_000   // ms

    /// `gongFrames` and `endGongFrames` are the lengths of the start and end gong sounds
    /// at `rate`.
    public init(configuration c: TimerConfiguration, rate: Int, gongFrames: Int64, hasAmbience: Bool) {
        self.rate = rate
        let frames = { (ms: Int64) -> Int64 in ms * Int64(rate) / 1000 }
        let start = frames(c.preparation)
        let end = start + frames(c.duration)
        let offsets = GongSchedule.strikeOffsets(strikes: c.strikes).map(frames)
        meditationStart = start
        meditationEnd = end
        startStrikes = offsets.map { start + $0 }
        startGongEnd = (startStrikes.last ?? start) + gongFrames
        intervalGongs = c.intervalTimes.map { start + frames($0) }
        randomBells = c.randomBellTimes.map { start + frames($0) }
        endStrikes = offsets.map { end + $0 }
        total = (endStrikes.last ?? end) + gongFrames
        sections = c.sections
        openEnded = c.openEnded
        var sectionStrikes: [(frame: Int64, ms: Int64)] = []
        if let sections = c.sections {
            for (i, (t, s)) in zip(sections.starts, sections.list).enumerated() where i > 0 {
                let n = s.kind == .walk ? c.sectionStrikes.intoWalk : c.sectionStrikes.intoSit
                for k in 0..<n {
                    let ms = t + Int64(k) * GongSchedule.strikeSpacing
                    sectionStrikes.append((start + frames(ms), ms))
                }
            }
        }
        self.sectionStrikes = sectionStrikes.map(\.frame)
        var segments: [AmbiencePlan] = []
        if hasAmbience && startGongEnd < end {
            let fadeIn = frames(Self.ambienceFadeIn), fadeOut = frames(Self.ambienceFadeOut)
            if let sections = c.sections, !c.ambienceDuringWalks {
                for r in sections.sitRanges {
                    let a = max(start + frames(r.lowerBound), startGongEnd), b = start + frames(r.upperBound)
                    if a < b { segments.append(AmbiencePlan(start: a, fadeIn: fadeIn, fadeOutStart: b, fadeOut: fadeOut)) }
                }
            } else {
                segments = [AmbiencePlan(start: startGongEnd, fadeIn: fadeIn, fadeOutStart: end, fadeOut: fadeOut)]
            }
        }
        ambienceSegments = segments
        ambience = segments.first
        var gongs: [PlannedGong] = []
        let ms = { (frame: Int64) -> Int64 in (frame - start) * 1000 / Int64(rate) }
        for f in startStrikes { gongs.append(PlannedGong(frame: f, milliseconds: ms(f), sound: c.gong.id, volume: c.gongVolume, reason: .start)) }
        for f in intervalGongs {
            gongs.append(PlannedGong(frame: f, milliseconds: ms(f), sound: c.intervalGong.id, volume: c.intervalVolume,
                                     reason: c.bellsGiven ? .bell : .interval))
        }
        for f in randomBells {
            gongs.append(PlannedGong(frame: f, milliseconds: ms(f), sound: c.intervalGong.id, volume: c.intervalVolume, reason: .random))
        }
        for s in sectionStrikes {
            gongs.append(PlannedGong(frame: s.frame, milliseconds: s.ms, sound: c.sectionGong.id, volume: c.gongVolume, reason: .section))
        }
        if !c.openEnded {
            for f in endStrikes { gongs.append(PlannedGong(frame: f, milliseconds: ms(f), sound: c.gong.id, volume: c.gongVolume, reason: .end)) }
        }
        self.gongs = gongs.sorted { ($0.frame, $0.reason.rawValue) < ($1.frame, $1.reason.rawValue) }
    }

    public func state(at frame: Int64) -> TimerState {
        if frame < meditationStart { return .preparation }
        if frame < min(startGongEnd, meditationEnd) { return .startGong }
        if frame < meditationEnd { return .running }
        if frame < total { return .endGong }
        return .completed
    }

    public func milliseconds(_ frames: Int64) -> Int64 { frames * 1000 / Int64(rate) }

    /// Meditation time elapsed and left at `frame` (the preparation counts down on its own).
    public func elapsed(at frame: Int64) -> Int64 {
        milliseconds(min(max(0, frame - meditationStart), meditationEnd - meditationStart))
    }

    public func remaining(at frame: Int64) -> Int64 {
        frame < meditationStart ? milliseconds(meditationStart - frame)
                                : milliseconds(max(0, meditationEnd - frame))
    }

    /// The next gong (any reason) after `frame`, or the end gong.
    public func nextGong(after frame: Int64) -> Int64? {
        gongs.first { $0.frame > frame && $0.reason != .start }?.frame ?? (meditationEnd > frame && !openEnded ? meditationEnd : nil)
    }

    /// The section playing at `frame`: its index, kind and time left (ms).
    public func section(at frame: Int64) -> (index: Int, kind: Section.Kind, remaining: Int64)? {
        guard let sections, frame >= meditationStart else { return nil }
        return sections.section(at: milliseconds(frame - meditationStart))
    }
}
