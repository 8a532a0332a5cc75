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

/// Every frame of a timer session, worked out in advance from the configuration and
/// the lengths of the gong sounds: a pure value, tested without audio.
///
/// Preparation, then the start gong (the meditation time starts with its first strike),
/// the ambience from the end of the start gong with a 10-s fade-in, interval gongs, and
/// at zero the end gong while the ambience fades out over 3 s. The session ends when
/// the end gong has rung out.
public struct TimerPlan: Sendable, Equatable {
    public let rate: Int
    public let meditationStart: Int64        // frame of the first start strike
    public let meditationEnd: Int64          // frame of zero (the first end strike)
    public let startStrikes: [Int64]
    public let startGongEnd: Int64
    public let intervalGongs: [Int64]
    public let endStrikes: [Int64]
    public let ambience: AmbiencePlan?
    public let total: Int64

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
        endStrikes = offsets.map { end + $0 }
        total = (endStrikes.last ?? end) + gongFrames
        if hasAmbience && startGongEnd < meditationEnd {
            ambience = AmbiencePlan(start: startGongEnd, fadeIn: frames(Self.ambienceFadeIn),
                                    fadeOutStart: meditationEnd, fadeOut: frames(Self.ambienceFadeOut))
        } else {
            ambience = nil
        }
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

    /// The next interval gong or the end gong after `frame`.
    public func nextGong(after frame: Int64) -> Int64? {
        (intervalGongs + [meditationEnd]).first { $0 > frame }
    }
}
