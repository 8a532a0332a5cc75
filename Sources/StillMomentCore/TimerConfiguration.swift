import StillMomentAudio

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
    public var device: DeviceName
    /// Sit and walk sections; nil for one sit of `duration` (then `duration` is their sum).
    public var sections: Sections?
    public var sectionGong: Sound
    public var sectionStrikes: SectionStrikes
    /// Random bells, already drawn (ms from the start gong), and how they were asked.
    public var randomBellTimes: [Int64]
    public var randomBells: RandomBells?
    /// The seed the random bells were drawn with (given, or drawn itself).
    public var seed: UInt64?
    /// The ambience plays on through walks (default), or only while sitting.
    public var ambienceDuringWalks: Bool
    /// The interval gongs are `--bells` given at times (not every N).
    public var bellsGiven: Bool
    /// Counts up with no end (`timer open`): ends with `finish` or `stop`; 24 h at most.
    public var openEnded: Bool

    public static let maxDuration: Int64 = 24 * 3_600_000
    /// Interval gongs at most every 10 s: a gong rings for several seconds, and a 24-h
    /// timer then has at most 8,640 of them.
    public static let minInterval: Int64 = 10_000
    /// Longest preparation.
    public static let maxPreparation: Int64 = 3_600_000

    /// Builds the configuration from the settings overlaid with command-line options
    /// (both as typed text, keyed like the options), through the typed request.
    /// A sound the settings name that is not here (a shared setting from another device
    /// whose imported sound has not arrived, or never will under `sync files none`) plays
    /// as the default instead: the settings never stop a timer (an option typed does).
    public init(settings: Settings, options: [String: String], catalog: SoundCatalog) throws(CoreError) {
        var stored = try TimerRequest(text: settings.timerValues)
        func here(_ id: String?) -> String? {
            guard let id, id != "silent", id != "off" else { return id }
            return catalog.sounds.contains { $0.id == id } ? id : nil
        }
        stored.gong = here(stored.gong)
        stored.intervalGong = here(stored.intervalGong)
        stored.sectionGong = here(stored.sectionGong)
        stored.ambience = here(stored.ambience)
        try self.init(request: stored.overlaid(by: try TimerRequest(text: options)), catalog: catalog)
    }
}
