// A message on a node's command topic read into what it asks: pure, and strict (a payload that
// is not exactly what Home Assistant sends for that entity is refused with the reason, which
// the bridge logs in one line). What the command then does is the bridge's: typed calls only.
import StillMomentCore

/// What a command topic's message asks for.
public enum MQTTCommand: Sendable, Equatable {
    /// A button: start (the minutes set), start the preset chosen, pause, resume, finish, stop, bell.
    case press(Button)
    /// The select: a preset's name (or `HomeAssistantDiscovery.noPreset`).
    case choosePreset(String)
    /// The number: the timer's minutes.
    case setMinutes(Int)
    /// The switch: schedules on or off.
    case schedules(Bool)

    public enum Button: String, Sendable, CaseIterable {
        case start, startPreset = "start_preset", pause, resume, finish, stop, bell
    }

    /// The largest payload read (a preset's name is at most a few hundred bytes).
    public static let maxPayload = 512

    /// Reads `payload` sent to `topic`; nil for a topic that is not one of `topics`'s commands.
    /// Throws the reason (English: it goes to the log) for a payload that is refused.
    public static func parse(topic: String, payload: [UInt8], topics: MQTTTopics) throws(MQTTRefusal) -> MQTTCommand? {
        let prefix = topics.command("")
        guard topic.hasPrefix(prefix) else { return nil }
        let object = String(topic.dropFirst(prefix.count))
        guard payload.count <= maxPayload else { throw MQTTRefusal("\(payload.count) bytes (at most \(maxPayload))") }
        guard let text = String(validating: payload, as: UTF8.self),
              !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw MQTTRefusal("not a line of UTF-8 text")
        }
        if let button = Button(rawValue: object) {
            guard text == "PRESS" else { throw MQTTRefusal("a button takes PRESS") }
            return .press(button)
        }
        switch object {
        case "preset":
            guard !text.isEmpty else { throw MQTTRefusal("no preset named") }
            return .choosePreset(text)
        case "minutes":
            // Home Assistant sends "20" or "20.0".
            guard let v = Double(text), v.isFinite, v == v.rounded(), v >= 1, v <= 600 else {
                throw MQTTRefusal("minutes must be a whole number from 1 to 600")
            }
            return .setMinutes(Int(v))
        case "schedules":
            guard text == "ON" || text == "OFF" else { throw MQTTRefusal("the switch takes ON or OFF") }
            return .schedules(text == "ON")
        default:
            throw MQTTRefusal("no such command")
        }
    }
}

/// Why a message was ignored (logged in one line with its topic).
public struct MQTTRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
