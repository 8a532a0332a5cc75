// The rooms' side of the daemon's MQTT connection (MQTTBridge owns the client): this node's
// presence (room, clock, version; retained under the site's prefix), the other nodes' as
// the broker tells them, and rings: sent for every node, and taken in, each played at its
// instant or left out for the reason Core's RoomRing gives. On the daemon's thread only.
import FoundationEssentials
import Logging
import StillMomentAudio
import StillMomentCore

final class RoomsLink {
    private let host: SessionService
    private let log: Logger
    private let version: String
    let node: String
    private var client: MQTTClient?
    private var settings: RoomSettings?
    private var known: [String: RoomNode] = [:]
    private var online: [String: Bool] = [:]
    private var lastClock: ClockState?
    private var clockLookedAt = 0.0
    private var site: RoomName?
    /// This node's entries for rooms as last published (uuid → payload).
    private var published: [String: String] = [:]
    private var timetableVersion: Int64?
    private var versionLookedAt = -Double.infinity

    init(host: SessionService, log: Logger, version: String, node: String) {
        self.host = host
        self.log = log
        self.version = version
        self.node = node
    }

    var isConnected: Bool { client != nil }
    var room: RoomName? { settings?.room }

    /// The nodes heard of (this one included), by room then name.
    var nodes: [RoomNode] {
        var list = Array(known.values)
        if let me = me() { list.removeAll { $0.node == node }; list.append(me) }
        return list.sorted { ($0.room?.text ?? "~", $0.node) < ($1.room?.text ?? "~", $1.node) }
    }

    // MARK: topics

    static func prefix(_ site: RoomName) -> String { "stillmoment-site/\(site.text)" }
    private func presenceTopic(_ site: RoomName, _ node: String) -> String { "\(Self.prefix(site))/node/\(node)" }
    private func ringTopic(_ site: RoomName) -> String { "\(Self.prefix(site))/ring" }
    private func timetableTopic(_ site: RoomName, _ uuid: String) -> String { "\(Self.prefix(site))/timetable/\(uuid)" }

    // MARK: the connection

    /// The settings as read now (the bridge calls it when the settings file changed).
    func follow(_ all: Settings) {
        let new: RoomSettings?
        do throws(CoreError) { new = try RoomSettings(all) } catch {
            log.error("rooms: \(error.text(.en)); rooms stay as they were")
            return
        }
        guard new != settings else { return }
        let old = settings
        settings = new
        if let client, let new, new.site != site {
            subscribe(client, new.site)
        }
        if old?.room != new?.room { log.info("rooms: this node is in \(new?.room.map { "room \($0)" } ?? "no room")") }
        publishPresence()
    }

    func connected(_ client: MQTTClient) {
        self.client = client
        client.subscribe("stillmoment/+/availability")
        if let site = settings?.site { subscribe(client, site) }
        publishPresence()
    }

    private func subscribe(_ client: MQTTClient, _ new: RoomName) {
        site = new
        known = [:]
        client.subscribe("\(Self.prefix(new))/node/+")
        client.subscribe(ringTopic(new))
        client.subscribe("\(Self.prefix(new))/timetable/+")
        published = [:]
        publishTimetable()
    }

    func disconnected() { client = nil }

    // MARK: what comes in

    /// Takes a message that is the rooms' (true), or leaves it to the bridge (false).
    func receive(topic: String, payload: [UInt8]) -> Bool {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        if levels.count == 3, levels[0] == "stillmoment", levels[2] == "availability" {
            let who = String(levels[1])
            let up = payload == Array("online".utf8)
            if online.count < 1000 || online[who] != nil { online[who] = up }     // bounded, as the nodes are
            if var n = known[who] { n.online = up; n.seen = WallClock.milliseconds(); known[who] = n }
            return true
        }
        guard let site, topic.hasPrefix(Self.prefix(site) + "/") else { return false }
        let rest = topic.dropFirst(Self.prefix(site).count + 1)
        if rest == "ring" {
            take(ring: payload)
            return true
        }
        if rest.hasPrefix("timetable/") {
            take(timetable: String(rest.dropFirst(10)), payload)
            return true
        }
        if rest.hasPrefix("node/") {
            let who = String(rest.dropFirst(5))
            guard MQTTTopics.sanitise(who) == who, who != "_" else { return true }
            if payload.isEmpty { known[who] = nil; return true }      // a node that left
            do throws(CoreError) {
                var n = try RoomNode(node: who, presence: payload, seen: WallClock.milliseconds())
                n.online = online[who] ?? true
                if known[who] == nil && who != node { log.info("rooms: node \(who) in \(n.room.map { "room \($0)" } ?? "no room")") }
                if known.count < 1000 || known[who] != nil { known[who] = n }
            } catch {
                log.warning("rooms: ignored node \(who)'s presence: \(error.text(.en))")
            }
            return true
        }
        return true
    }

    private func take(ring payload: [UInt8]) {
        let ring: RoomRing
        do throws(CoreError) { ring = try RoomRing(payload: payload) } catch {
            log.warning("rooms: ignored a ring: \(error.text(.en))")
            return
        }
        guard let settings else { return }
        let clock = ClockState.read()
        let verdict = ring.verdict(room: settings.room, clock: clock, boundMilliseconds: settings.clockBoundMilliseconds,
                                   nowMilliseconds: WallClock.milliseconds())
        switch verdict {
        case .notHere: return
        case .play: break
        case .late, .tooFar, .clockUnfit:
            log.warning("rooms: \(verdict.text(ring))")
            return
        }
        let at = settings.monotonicInstant(realtimeMilliseconds: ring.atMilliseconds)
        do throws(ProtocolError) {
            let id = try host.ringBell(sound: ring.bell, strikes: ring.strikes, volume: ring.volume, heardAt: at)
            log.info("rooms: \(verdict.text(ring)) in room \(settings.room?.text ?? "-") (session \(id))")
        } catch {
            log.warning("rooms: ring \(ring.id) from \(ring.from) not played: \(error.words.en)")
        }
    }

    /// Another node's entry for rooms (kept as a copy in this node's schedule, which rings it
    /// from there with the broker gone), or one of this node's own as the broker still holds
    /// it (removed there when it is no longer in the schedule).
    private func take(timetable uuid: String, _ payload: [UInt8]) {
        guard !uuid.isEmpty, uuid.utf8.count <= 64, MQTTTopics.sanitise(uuid) == uuid.lowercased() else { return }
        let table = ScheduleStore(store: host.store)
        do throws(CoreError) {
            if payload.isEmpty {
                if try table.dropCopy(uuid: uuid) { log.info("rooms: timetable entry \(uuid) was removed by its node") }
                return
            }
            let entry = try RoomTimetableEntry(payload: payload)
            guard entry.uuid == uuid else { throw CoreError.badRequest(.same("its id is not its topic's")) }
            if entry.from == node {
                let own = try table.all().contains { $0.uuid == uuid && $0.origin == nil }
                if !own, let client, let site {
                    client.publish(timetableTopic(site, uuid), "", retain: true, qos: 1)
                    log.info("rooms: timetable entry \(uuid) is no longer this node's: removed from the broker")
                }
                return
            }
            if try table.keepCopy(entry, now: Int64(WallClock.milliseconds() / 1000)) {
                log.info("rooms: timetable entry \(uuid) from \(entry.from): \(entry.when) --bell \(entry.bell) for rooms \(entry.rooms)")
                _ = host.reschedule()
            }
        } catch {
            log.warning("rooms: ignored timetable entry \(Display.clean(String(uuid.prefix(64)))): \(error.text(.en))")
        }
    }

    /// This node's entries for rooms, retained for every node (those changed since the last
    /// time, and an empty message for each removed).
    private func publishTimetable() {
        guard let client, let site else { return }
        let entries: [ScheduleEntry]
        do { entries = try ScheduleStore(store: host.store).all() } catch {
            log.warning("rooms: cannot read the schedule: \(error.description)")
            return
        }
        var now: [String: String] = [:]
        for e in entries where e.origin == nil {
            guard let uuid = e.uuid, let t = RoomTimetableEntry(e, from: node) else { continue }
            now[uuid] = t.payload
        }
        for (uuid, payload) in now where published[uuid] != payload {
            client.publish(timetableTopic(site, uuid), payload, retain: true, qos: 1)
        }
        for uuid in published.keys where now[uuid] == nil {
            client.publish(timetableTopic(site, uuid), "", retain: true, qos: 1)
        }
        if now != published { log.info("rooms: \(now.count) timetable entr\(now.count == 1 ? "y" : "ies") for rooms published") }
        published = now
    }

    // MARK: what goes out

    /// A ring for every node of the site (this one hears it back from the broker).
    func send(_ ring: RoomRing) -> Bool {
        guard let client, let site else { return false }
        return client.publish(ringTopic(site), ring.payload, retain: false, qos: 1)
    }

    private func me() -> RoomNode? {
        guard let settings else { return nil }
        let clock = lastClock ?? ClockState.read()
        return RoomNode(node: node, room: settings.room, clock: clock, version: version, online: client != nil,
                        seen: WallClock.milliseconds())
    }

    /// This node's presence, retained: its room and its clock as read now.
    private func publishPresence() {
        guard let client, let site, settings != nil else { return }
        lastClock = ClockState.read()
        clockLookedAt = MonotonicClock.seconds()
        guard let me = me() else { return }
        client.publish(presenceTopic(site, node), me.presence, retain: true, qos: 1)
    }

    /// Once a minute at most (the loop's turns, never a wake-up of its own): the clock read
    /// again, and the presence said again when its state changed.
    func tick(now: Double) {
        // The schedule's change counter, every 2 s at most on the loop's turns: this
        // node's entries for rooms published again when it changed.
        if client != nil, now - versionLookedAt >= 2 {
            versionLookedAt = now
            let v = try? ScheduleStore(store: host.store).version()
            if let v, v != timetableVersion {
                if timetableVersion != nil { publishTimetable() }
                timetableVersion = v
            }
        }
        guard client != nil, now - clockLookedAt >= 60 else { return }
        clockLookedAt = now
        let clock = ClockState.read()
        let before = lastClock
        lastClock = clock
        if before?.synchronised != clock.synchronised
            || abs((before?.estimatedErrorMicroseconds ?? 0) - clock.estimatedErrorMicroseconds) > 500 {
            publishPresence()
        }
    }

    /// Leaving: the presence removed (empty retained), so the node is no longer listed.
    func leave() {
        guard let client, let site else { return }
        client.publish(presenceTopic(site, node), "", retain: true, qos: 0)
    }
}
