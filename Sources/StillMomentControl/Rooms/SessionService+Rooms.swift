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

// MARK: a sit in several rooms

extension SessionService {
    /// `timer … --rooms`: the sit as this node resolves it (settings, preset, options; the
    /// random bells' seed fixed, no device) sent to every node for an instant a little
    /// ahead; this node plays it too when its room is one of them, as every node does.
    func startRoomSit(_ configuration: TimerConfiguration, preset: Preset?, options: TimerStartRequest,
                      rooms: RoomChoice) throws(ProtocolError) -> Status {
        guard let link = roomsLink, link.isConnected else {
            throw ProtocolError(.failed, both("a sit in several rooms goes through the MQTT broker, and this node is not connected to one (stillmoment mqtt status)",
                                              "eine Sitzung in mehreren Räumen geht über den MQTT-Broker, und dieser Knoten ist mit keinem verbunden (stillmoment mqtt status)"))
        }
        let sit: RoomSit
        do throws(CoreError) {
            var request = try TimerRequest(settings: try Settings.load(), preset: preset, options: try options.request())
            request.device = nil
            request.seed = configuration.seed
            sit = try RoomSit(id: UUID().uuidString.lowercased(), from: link.node, rooms: rooms, revision: 1, phase: .playing,
                              atMilliseconds: WallClock.milliseconds() + RoomSettings.leadMilliseconds, position: 0, timer: request)
        } catch {
            throw ProtocolError(error)
        }
        guard link.send(sit) else {
            throw ProtocolError(.failed, both("the broker did not take the sit (the connection was just lost)",
                                              "der Broker hat die Sitzung nicht angenommen (die Verbindung ging eben verloren)"))
        }
        log.info("sit \(sit.id) for rooms \(rooms) at \(sit.atMilliseconds)")
        var s = status()
        s.rang = .init(id: sit.id, bell: configuration.gong.id, at: sit.atMilliseconds, rooms: rooms.description)
        return s
    }

    /// A pause, resume or stop of the sit in several rooms this node plays: a new state of
    /// the sit for every node, a lead ahead (nil: the session playing is not such a sit, or
    /// the broker is gone, and the request is this node's alone).
    /// A node that started a sit for other rooms than its own (nothing plays here) changes
    /// that sit the same way.
    func roomSitChange(_ phase: RoomSit.Phase) throws(ProtocolError) -> Status? {
        guard let link = roomsLink else { return nil }
        let session = active?.id ?? startingID
        let here = session != nil && link.sitSession == session
        guard here || (active == nil && startingID == nil && link.ownSitElsewhere != nil) else { return nil }
        guard link.isConnected else {
            if !here { return nil }
            log.warning("rooms: the broker is gone: \(phase.rawValue) of the sit in several rooms is this node's only")
            link.changedHere(phase)
            return nil
        }
        guard try link.change(phase) else { return nil }
        return status()
    }

    /// A peer's sit starts here: its timer over this node's settings (its own device), the
    /// timeline at `from` ms heard at `heardAt` (CLOCK_MONOTONIC ns).
    func startPeerSit(_ timer: TimerRequest, from: Int64, heardAt: UInt64, replacing: Int? = nil) throws(ProtocolError) -> Int {
        // As the schedule's entries: what plays here is never interrupted by a peer (but the
        // sit's own session, started again, replaces itself).
        guard deviceFree || (replacing != nil && activeSession == replacing) else {
            throw ProtocolError(.busy, both("something plays here", "hier spielt etwas"))
        }
        let (configuration, catalog): (TimerConfiguration, SoundCatalog)
        do { (configuration, catalog) = try peerSit(timer) } catch { throw ProtocolError(error) }
        return try launchTimer(configuration, catalog: catalog, preset: nil, scheduled: false, heardAt: heardAt, from: from)
    }

    /// A peer's sit as this node plays it: the sit's timer over this node's settings (the
    /// options the sit leaves unset, which its maker fills from its own), on this node's
    /// device.
    private func peerSit(_ timer: TimerRequest) throws(CoreError) -> (TimerConfiguration, SoundCatalog) {
        let catalog = try SoundCatalog.withCustomSounds(store: store)
        let settings = try Settings.load()
        var request = try TimerRequest(text: settings.timerValues).overlaid(by: timer)
        request.device = try DeviceName.setting(settings)
        return (try TimerConfiguration(request: request, catalog: catalog), catalog)
    }

    /// The sit in several rooms playing here as session `id`, paused now (the instant).
    func pausePeerSit(_ id: Int) {
        guard let s = active, s.id == id, case .timer(let t) = s.player else { return }
        if !s.paused.exchange(true, ordering: .acquiringAndReleasing) {
            s.command(on: worker, "pause") { t.pauseForRooms() }
            log.info("session \(s.id) paused (a sit in several rooms)")
        }
    }

    /// It goes on from `position` ms of its timeline, heard at `heardAt`.
    func resumePeerSit(_ id: Int, from position: Int64, heardAt: UInt64) {
        guard let s = active, s.id == id, case .timer(let t) = s.player else { return }
        if s.paused.exchange(false, ordering: .acquiringAndReleasing) {
            s.command(on: worker, "resume") { t.resume(from: position, heardAt: heardAt) }
            log.info("session \(s.id) resumes from \(position) ms (a sit in several rooms)")
        }
    }

    /// How late the sit's session `id` met its instant (s; nil: on time, or not known yet).
    func sitMissedStart(_ id: Int) -> Double? {
        guard let s = active, s.id == id, case .timer(let t) = s.player else { return nil }
        return t.engine.missedStart
    }

    /// How much of its first audio the sit's session `id` left out to meet its last instant
    /// (s; nil: none).
    func sitCaughtUp(_ id: Int) -> Double? {
        guard let s = active, s.id == id, case .timer(let t) = s.player else { return nil }
        return t.engine.caughtUpStart
    }

    /// It ends here now (the instant), fading out as a stop does.
    func stopPeerSit(_ id: Int) {
        if active == nil, let st = startingID, st == id {
            _ = try? stopLocal()
            return
        }
        guard let s = active, s.id == id else { return }
        _ = try? stopLocal()
    }

    /// The length of a peer's sit's timeline here, in ms (an open sit's: 24 h, its most; nil:
    /// not known, its sounds are not all here, which the start will say).
    func sitLength(_ timer: TimerRequest) -> Int64? {
        do throws(CoreError) {
            let (configuration, catalog) = try peerSit(timer)
            if configuration.openEnded { return TimerConfiguration.maxDuration }
            let rate = 44100
            return try TimerSession.plan(for: configuration, catalog: catalog, sampleRate: rate).total * 1000 / Int64(rate)
        } catch {
            return nil
        }
    }
}
