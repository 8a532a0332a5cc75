// The service's calls for rooms: a bell here or in several rooms (`ring`), and the nodes the
// broker knows (`rooms`). What a ring is, and whether a node plays it, is Core's
// (Rooms/RoomRing.swift); the link to the broker is RoomsLink's.
import FoundationEssentials
import StillMomentAudio
import StillMomentCore

extension SessionService {
    /// `ring`: the bell (the settings' gong, strikes and volume where the request says
    /// none) here now, or, with rooms, sent to every node for an instant a little ahead (this
    /// node plays it too when its room is one of them, as every node does: from the broker).
    func ring(_ r: RingRequest) throws(ProtocolError) -> Status {
        let bell: String, strikes: Int, volume: Double
        do throws(CoreError) {
            let settings = try Settings.load()
            let defaults = try TimerRequest(text: ["gong": settings.value("gong"), "gong-volume": settings.value("gong-volume"),
                                                   "strikes": settings.value("strikes")])
            bell = r.bell ?? defaults.gong ?? "temple-bell"
            strikes = r.strikes ?? defaults.strikes ?? 1
            volume = r.volume ?? defaults.gongVolume ?? 1
            _ = try SoundCatalog.withCustomSounds(store: store).gong(bell)
        } catch {
            throw ProtocolError(error)
        }
        guard let rooms = r.rooms else {
            return started(try ringBell(sound: bell, strikes: strikes, volume: volume))
        }
        guard let link = roomsLink, link.isConnected else {
            throw ProtocolError(.failed, both("a ring in several rooms goes through the MQTT broker, and this node is not connected to one (stillmoment mqtt status)",
                                              "ein Gong in mehreren Räumen geht über den MQTT-Broker, und dieser Knoten ist mit keinem verbunden (stillmoment mqtt status)"))
        }
        let ring: RoomRing
        do throws(CoreError) {
            ring = try RoomRing(id: UUID().uuidString.lowercased(), from: link.node, bell: bell, strikes: strikes, volume: volume,
                                atMilliseconds: WallClock.milliseconds() + RoomSettings.leadMilliseconds, rooms: rooms)
        } catch {
            throw ProtocolError(error)
        }
        guard link.send(ring) else {
            throw ProtocolError(.failed, both("the broker did not take the ring (the connection was just lost)",
                                              "der Broker hat den Gong nicht angenommen (die Verbindung ging eben verloren)"))
        }
        var s = status()
        s.rang = .init(id: ring.id, bell: bell, at: ring.atMilliseconds, rooms: rooms.description)
        return s
    }

    /// `rooms`: the status, with the nodes the broker knows (none while not connected).
    func roomsStatus() -> Status {
        var s = status()
        s.nodes = roomsLink?.nodes ?? []
        return s
    }
}
