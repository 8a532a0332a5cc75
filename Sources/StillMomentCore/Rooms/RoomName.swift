// A room's name (`stillmoment room set hall`) and a choice of rooms (`--rooms hall,garden`
// or `all`): the one parser of both, for the CLI, the daemon and messages from other
// nodes. A name is a topic level and a word in a log line, so it is kept to a–z, 0–9, -.

/// The name of a room: 1–32 of a–z, 0–9 and -, starting with a letter or digit; "all" is
/// the choice of every room, never a room.
public struct RoomName: Sendable, Hashable, Codable, CustomStringConvertible, Comparable {
    public let text: String

    public init(parsing raw: String) throws(CoreError) {
        let text = raw.lowercased()
        let fine = !text.isEmpty && text.utf8.count <= 32
            && text.unicodeScalars.allSatisfy { ($0 >= "a" && $0 <= "z") || ($0 >= "0" && $0 <= "9") || $0 == "-" }
            && !text.hasPrefix("-") && text != "all"
        guard fine else {
            let shown = Display.clean(String(raw.prefix(40)))
            throw CoreError.badValue(option: "room", reason: both(
                "'\(shown)' is no room name: 1 to 32 of a–z, 0–9 and -, not starting with - (and not 'all')",
                "'\(shown)' ist kein Raumname: 1 bis 32 Zeichen aus a–z, 0–9 und -, nicht mit - am Anfang (und nicht 'all')"))
        }
        self.text = text
    }

    public var description: String { text }
    public static func < (a: RoomName, b: RoomName) -> Bool { a.text < b.text }

    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        do throws(CoreError) { self = try RoomName(parsing: raw) } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.text(.en)))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(text)
    }
}

/// Which rooms a ring is for: every room, or some (at most 64, each named once).
public enum RoomChoice: Sendable, Equatable, CustomStringConvertible {
    case all
    case some([RoomName])

    public static let most = 64

    /// "all", or names separated by commas ("hall,garden"); one line when wrong.
    public init(parsing text: String) throws(CoreError) {
        if text.lowercased() == "all" { self = .all; return }
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count <= Self.most else {
            throw CoreError.badValue(option: "--rooms", reason: both("more than \(Self.most) rooms", "mehr als \(Self.most) Räume"))
        }
        var names: [RoomName] = []
        for part in parts {
            let name = try RoomName(parsing: part.trimmingCharacters(in: " "))
            if !names.contains(name) { names.append(name) }
        }
        self = .some(names)
    }

    public init(rooms: [RoomName]) throws(CoreError) {
        guard !rooms.isEmpty, rooms.count <= Self.most else {
            throw CoreError.badValue(option: "--rooms", reason: both("from 1 to \(Self.most) rooms", "1 bis \(Self.most) Räume"))
        }
        self = .some(rooms)
    }

    public func includes(_ room: RoomName) -> Bool {
        switch self {
        case .all: true
        case .some(let list): list.contains(room)
        }
    }

    /// As written on the command line and in messages: "all" or "hall,garden".
    public var description: String {
        switch self {
        case .all: "all"
        case .some(let list): list.map(\.text).joined(separator: ",")
        }
    }
}

private extension Substring {
    func trimmingCharacters(in set: Character) -> String {
        String(drop { $0 == set }.reversed().drop { $0 == set }.reversed())
    }
}
