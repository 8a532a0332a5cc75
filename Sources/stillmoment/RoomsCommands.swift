// `stillmoment room`, `rooms` and `ring`: this node's room (the `room*` settings, read by the
// daemon), the nodes the broker knows, and a bell here or in several rooms at one instant.
// The rules (names, which rooms, the instant) are Core's; the ring is the daemon's.
import ArgumentParser
import FoundationEssentials
import StillMomentAudio
import StillMomentControl
import StillMomentCore

struct RoomCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "room",
        abstract: "This node's room, for rings in several rooms (over the MQTT broker).",
        discussion: """
            Every node of one site (a house, a retreat centre) connects to the same broker \
            (stillmoment mqtt enable) and names its room. A ring sent to rooms \
            (stillmoment ring BELL --rooms hall,garden) is heard at the same instant in each; \
            a node whose clock is not synchronised (chrony) is left out and says why.
            """,
        subcommands: [Show.self, Set.self, Off.self],
        defaultSubcommand: Show.self
    )

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Show the room, site, offset and clock (the default).")
        func run() throws {
            let rooms: RoomSettings
            do { rooms = try RoomSettings(try Settings.load()) } catch { throw Console.fail(error) }
            Console.out(tr("room: ", "Raum: ") + (rooms.room?.text ?? tr("none", "keiner")))
            Console.out(tr("site: ", "Ort: ") + rooms.site.text)
            Console.out(tr("offset: ", "Versatz: ") + "\(RoomCommand.number(rooms.offsetMilliseconds)) ms")
            Console.out(tr("clock: ", "Uhr: ") + RoomCommand.clockText(ClockState.read(), bound: rooms.clockBoundMilliseconds))
        }
    }

    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set", abstract: "Put this node in a room.")
        @Argument(help: "The room: 1 to 32 of a–z, 0–9 and -.") var name: String
        @Option(help: "The site every node of this place shares (default: home).") var site: String?
        @Option(name: .customLong("offset"), help: "Milliseconds this node's speaker sounds later than its device says (-500 to 500).")
        var offset: Double?

        func run() throws {
            do throws(CoreError) {
                let room = try RoomName(parsing: name)
                let catalog = try SoundCatalog.withCustomSounds(store: try LibraryStore())
                try Settings.update { s throws(CoreError) in
                    try s.set("room", room.text, catalog: catalog)
                    if let site { try s.set("room-site", try RoomName(parsing: site).text, catalog: catalog) }
                    if let offset { try s.set("room-offset-ms", RoomCommand.number(offset), catalog: catalog) }
                }
                Console.out(tr("this node is in room \(room)", "dieser Knoten ist im Raum \(room)"))
            } catch {
                throw Console.fail(error)
            }
            MQTTCommandLine.nudgeDaemon(start: false)
        }
    }

    struct Off: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "off", abstract: "Take this node out of every room.")
        func run() throws {
            do throws(CoreError) {
                let catalog = try SoundCatalog.withCustomSounds(store: try LibraryStore())
                try Settings.update { s throws(CoreError) in try s.set("room", "", catalog: catalog) }
            } catch {
                throw Console.fail(error)
            }
            Console.out(tr("this node is in no room", "dieser Knoten ist in keinem Raum"))
            MQTTCommandLine.nudgeDaemon(start: false)
        }
    }

    static func number(_ v: Double) -> String { abs(v) < 1e9 && v == v.rounded() ? String(Int(v)) : String(v) }

    static func clockText(_ c: ClockState, bound: Int) -> String {
        guard c.synchronised else { return tr("not synchronised (left out of rings)", "nicht synchronisiert (bei Gongs ausgelassen)") }
        let us = max(0, c.estimatedErrorMicroseconds)
        let error = "\(us / 1000).\(String(repeating: "0", count: 3 - String(us % 1000).count))\(us % 1000)"
        return c.fit(boundMilliseconds: bound) ? tr("synchronised (±\(error) ms)", "synchronisiert (±\(error) ms)")
            : tr("synchronised, but ±\(error) ms is beyond \(bound) ms (left out of rings)",
                 "synchronisiert, aber ±\(error) ms liegt über \(bound) ms (bei Gongs ausgelassen)")
    }
}

struct RoomsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rooms",
        abstract: "List the nodes the broker knows: room, online, clock, last heard.")
    @Flag(help: "Print the nodes as JSON.") var json = false

    func run() throws {
        let status = try control(.rooms, start: true)
        let nodes = status.nodes ?? []
        if json {
            Console.out(jsonText(nodes))
            return
        }
        guard status.mqtt?.connected == true else {
            throw Console.fail(tr("this node is not connected to an MQTT broker (stillmoment mqtt status)",
                                  "dieser Knoten ist mit keinem MQTT-Broker verbunden (stillmoment mqtt status)"))
        }
        let bound = (try? RoomSettings(try Settings.load()))?.clockBoundMilliseconds ?? 2
        let now = WallClock.milliseconds()
        for n in nodes {
            let room = n.room?.text ?? "-"
            let online = n.online ? tr("online", "online") : tr("offline", "offline")
            let ago = max(0, (now - n.seen) / 1000)
            Console.out("\(room)\t\(n.node)\t\(online)\t\(RoomCommand.clockText(n.clock, bound: bound))\t"
                        + tr("heard \(ago) s ago", "vor \(ago) s gehört"))
        }
    }
}

extension RingCommand {
    /// An instant (ms since 1970) as hh:mm:ss.mmm UTC.
    static func instantText(_ at: Int64) -> String {
        let ms = Int(at % 86_400_000)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let milli = ms % 1000
        return "\(two(ms / 3_600_000)):\(two(ms / 60_000 % 60)):\(two(ms / 1000 % 60)).\(milli < 100 ? (milli < 10 ? "00" : "0") : "")\(milli) UTC"
    }
}

struct RingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ring",
        abstract: "Ring a bell now: here, or in several rooms at the same instant (--rooms).")
    @Argument(help: "The bell (a sound's id; default: the settings' gong).") var bell: String?
    @Option(help: "Strikes, 1 to 9 (default: the settings').") var strikes: Int?
    @Option(help: "Volume, 0 to 1 (default: the settings' gong volume).") var volume: Double?
    @Option(help: "Rooms: hall,garden or all (default: here only).") var rooms: String?

    func run() throws {
        let choice: RoomChoice?
        do throws(CoreError) {
            choice = try rooms.map { r throws(CoreError) in try RoomChoice(parsing: r) }
        } catch {
            throw Console.fail(error)
        }
        let status = try control(.ring(RingRequest(bell: bell, strikes: strikes, volume: volume, rooms: choice)), start: true)
        if let rang = status.rang {
            let clock = Self.instantText(rang.at)
            Console.out(tr("ringing \(rang.bell) in \(rang.rooms) at \(clock)", "Gong \(rang.bell) in \(rang.rooms) um \(clock)"))
        } else {
            let name = bell ?? ((try? Settings.load())?.value("gong") ?? "")
            Console.out(tr("ringing \(name) here", "Gong \(name) hier"))
        }
    }
}
