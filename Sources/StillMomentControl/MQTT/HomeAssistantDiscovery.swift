// What Home Assistant is told of a node through MQTT discovery: the topics (MQTTTopics) and,
// for each entity, its retained config (`homeassistant/<component>/<node>/<object>/config`).
// Pure: no I/O; the bridge publishes what this returns.
import StillMomentCore

/// The node's topics. Every part built from text (the node's name) is sanitised first.
public struct MQTTTopics: Sendable, Equatable {
    public let node: String
    public init(node: String) { self.node = Self.sanitise(node) }

    public var base: String { "stillmoment/\(node)" }
    public var availability: String { "\(base)/availability" }
    public var state: String { "\(base)/state" }
    public var event: String { "\(base)/event" }
    /// Commands: `<base>/cmd/<object>`; the bridge subscribes to `<base>/cmd/+`.
    public func command(_ object: String) -> String { "\(base)/cmd/\(object)" }
    public var commands: String { "\(base)/cmd/+" }
    /// Home Assistant's birth message (`online` when it starts).
    public static let homeAssistantStatus = "homeassistant/status"
    public func config(_ entity: HomeAssistantEntity) -> String {
        "homeassistant/\(entity.component)/\(node)/\(entity.object)/config"
    }

    /// Text as a topic level or id: lower case a–z, 0–9 and _, at most 64 (anything else,
    /// `/`, `+`, `#`, spaces and control characters included, becomes _).
    public static func sanitise(_ text: String) -> String {
        var out = ""
        for scalar in text.lowercased().unicodeScalars.prefix(64) {
            let v = scalar.value
            out.append((v >= 0x61 && v <= 0x7a) || (v >= 0x30 && v <= 0x39) || v == 0x5f || v == 0x2d ? Character(scalar) : "_")
        }
        return out.isEmpty ? "_" : out
    }
}

/// One entity of the node.
public struct HomeAssistantEntity: Sendable, Equatable {
    public let component: String
    public let object: String
    /// nil: the device's name (the main entity).
    public let name: String?
    public let extra: [String: JSON]

    /// Every entity, in a fixed order; their objects (and so their unique ids) never change.
    public static let all: [HomeAssistantEntity] = [
        .init(component: "button", object: "start", name: nil, extra: ["icon": .string("mdi:meditation")]),
        .init(component: "button", object: "start_preset", name: "Start preset", extra: ["icon": .string("mdi:play-box-outline")]),
        .init(component: "button", object: "pause", name: "Pause", extra: ["icon": .string("mdi:pause")]),
        .init(component: "button", object: "resume", name: "Resume", extra: ["icon": .string("mdi:play")]),
        .init(component: "button", object: "finish", name: "Finish", extra: ["icon": .string("mdi:flag-checkered")]),
        .init(component: "button", object: "stop", name: "Stop", extra: ["icon": .string("mdi:stop")]),
        .init(component: "button", object: "bell", name: "Ring a bell", extra: ["icon": .string("mdi:bell-ring")]),
        .init(component: "select", object: "preset", name: "Preset", extra: [:]),
        .init(component: "number", object: "minutes", name: "Minutes", extra: [
            "min": .number(1), "max": .number(600), "step": .number(1), "mode": .string("box"),
            "unit_of_measurement": .string("min"), "icon": .string("mdi:timer-outline"),
        ]),
        .init(component: "sensor", object: "phase", name: "Phase", extra: [
            "device_class": .string("enum"), "options": .array(PhaseText.all.map { .string($0) }),
        ]),
        .init(component: "sensor", object: "remaining", name: "Remaining", extra: [
            "device_class": .string("duration"), "unit_of_measurement": .string("s"),
        ]),
        .init(component: "sensor", object: "today", name: "Practice today", extra: [
            "unit_of_measurement": .string("min"), "state_class": .string("measurement"), "icon": .string("mdi:calendar-today"),
        ]),
        .init(component: "sensor", object: "next_sit", name: "Next scheduled sit", extra: ["device_class": .string("timestamp")]),
        .init(component: "binary_sensor", object: "sitting", name: "Sitting", extra: ["device_class": .string("running")]),
        .init(component: "event", object: "session", name: "Session", extra: [
            "event_types": .array(["started", "ended", "bell"].map { .string($0) }),
        ]),
        .init(component: "switch", object: "schedules", name: "Schedules", extra: ["icon": .string("mdi:calendar-clock")]),
    ]
}

/// The phase sensor's texts (English: Home Assistant shows sensor states as they come).
public enum PhaseText {
    public static let all = ["idle", "starting", "preparation", "start_gong", "running", "end_gong", "paused", "playing", "bell"]
}

/// The discovery configs of one node.
public struct HomeAssistantDiscovery: Sendable {
    public let topics: MQTTTopics
    public let version: String
    /// The web app's address, when it is known to run (`configuration_url`).
    public let webURL: String?
    /// The select's options: the presets' names (the first, "Settings", means none).
    public let presets: [String]

    public static let noPreset = "Settings"

    public init(topics: MQTTTopics, version: String, webURL: String?, presets: [String]) {
        self.topics = topics
        self.version = version
        self.webURL = webURL
        self.presets = presets
    }

    /// The device block: one device per node.
    public var device: JSON {
        var d: [String: JSON] = [
            "identifiers": .array([.string("stillmoment_\(topics.node)")]),
            "name": .string("Still Moment \(topics.node)"),
            "model": .string("stillmoment daemon"),
            "manufacturer": .string("Still Moment"),
            "sw_version": .string(version),
        ]
        if let webURL { d["configuration_url"] = .string(webURL) }
        return .object(d)
    }

    /// The config of one entity (its topic is `topics.config(entity)`).
    public func config(_ e: HomeAssistantEntity) -> JSON {
        var c: [String: JSON] = [
            "name": e.name.map { .string($0) } ?? .null,
            "unique_id": .string("stillmoment_\(topics.node)_\(e.object)"),
            "availability_topic": .string(topics.availability),
            "device": device,
            "origin": .object(["name": .string("stillmoment"), "sw_version": .string(version)]),
        ]
        for (k, v) in e.extra { c[k] = v }
        switch e.component {
        case "button":
            c["command_topic"] = .string(topics.command(e.object))
        case "select":
            c["command_topic"] = .string(topics.command(e.object))
            c["state_topic"] = .string(topics.state)
            c["value_template"] = .string("{{ value_json.preset }}")
            c["options"] = .array(([Self.noPreset] + presets.filter { $0 != Self.noPreset }).map { .string($0) })
        case "number", "switch":
            c["command_topic"] = .string(topics.command(e.object))
            c["state_topic"] = .string(topics.state)
            c["value_template"] = .string("{{ value_json.\(e.object) }}")
        case "event":
            c["state_topic"] = .string(topics.event)
        default:   // sensor, binary_sensor
            c["state_topic"] = .string(topics.state)
            c["value_template"] = .string("{{ value_json.\(e.object) }}")
        }
        return .object(c)
    }

    /// Every config topic and its payload.
    public var all: [(topic: String, payload: String)] {
        HomeAssistantEntity.all.map { (topics.config($0), config($0).line) }
    }
}
