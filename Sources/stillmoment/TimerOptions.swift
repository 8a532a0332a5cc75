import ArgumentParser
import StillMomentCore

/// The timer's options, shared by `timer` and `preset save`: each one a TimerOption,
/// read by the same typed parser as the settings file and the socket.
struct TimerOptions: ParsableArguments {
    @Option(help: "How long to sit (instead of DURATION): 20m, 90s, 1h15m.")
    var duration: String?

    @Option(help: "Countdown before the start gong: 10s, or off.")
    var preparation: String?

    @Option(help: "Start and end gong (see `stillmoment sounds`).", completion: Complete.gongs)
    var gong: String?

    @Option(name: .customLong("gong-volume"), help: "Gong volume, 0 to 1.")
    var gongVolume: String?

    @Option(help: "Strike the start and end gong N times, a few seconds apart (1 to 9).")
    var strikes: String?

    @Option(help: "Interval gongs every 5m (or another time, at least 10s), or off.")
    var interval: String?

    @Option(name: .customLong("interval-mode"), help: "repeating, after-start or before-end.", completion: Complete.modes)
    var intervalMode: String?

    @Option(name: .customLong("interval-gong"), help: "The interval gong's sound.", completion: Complete.gongs)
    var intervalGong: String?

    @Option(name: .customLong("interval-volume"), help: "Interval gong volume, 0 to 1.")
    var intervalVolume: String?

    @Option(help: "Interval gongs at given times, e.g. 5m,12m30s,-2m (negative: before the end). Replaces --interval.")
    var bells: String?

    @Option(help: "Sit and walk: \"sit 25m, walk 5m, sit 25m\" (instead of DURATION).")
    var sections: String?

    @Option(name: .customLong("section-gong"), help: "The gong between sections.", completion: Complete.gongs)
    var sectionGong: String?

    @Option(name: .customLong("section-strikes"), help: "Strikes into a walk and back into a sit: WALK,SIT (default 2,1), or one N for both.")
    var sectionStrikes: String?

    @Option(name: .customLong("random-bells"), help: "Bells at random spacings MIN-MAX within sit sections, e.g. 3m-10m.")
    var randomBells: String?

    @Option(help: "Makes the random bells repeatable (a whole number).")
    var seed: String?

    @Option(help: "Background ambience (forest, rain, …) or silent.", completion: Complete.ambiences)
    var ambience: String?

    @Option(name: .customLong("ambience-volume"), help: "Ambience volume, 0 to 1.")
    var ambienceVolume: String?

    @Option(name: .customLong("ambience-during"), help: "all (through walks, the default) or sit.")
    var ambienceDuring: String?

    @Option(help: "ALSA device (see `aplay -L`), or pulse / pulse:SINK for PulseAudio, alsa:NAME to force ALSA.")
    var device: String?

    /// Each option beside the property that holds it (one list: an option cannot be
    /// paired with another's value).
    private static let fields: [(option: TimerOption, value: KeyPath<TimerOptions, String?> & Sendable)] = [
        (.duration, \.duration), (.preparation, \.preparation), (.gong, \.gong), (.gongVolume, \.gongVolume),
        (.strikes, \.strikes), (.interval, \.interval), (.intervalMode, \.intervalMode),
        (.intervalGong, \.intervalGong), (.intervalVolume, \.intervalVolume), (.bells, \.bells),
        (.sections, \.sections), (.sectionGong, \.sectionGong), (.sectionStrikes, \.sectionStrikes),
        (.randomBells, \.randomBells), (.seed, \.seed), (.ambience, \.ambience), (.ambienceVolume, \.ambienceVolume),
        (.ambienceDuring, \.ambienceDuring), (.device, \.device),
    ]

    /// The options given, as text keyed by option name.
    var text: [String: String] {
        var out: [String: String] = [:]
        for field in Self.fields { if let value = self[keyPath: field.value] { out[field.option.rawValue] = value } }
        return out
    }

    /// The options above, in their order; each one's long name is its raw value.
    static let all: [TimerOption] = fields.map(\.option)
}
