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
    /// The sits in several rooms heard of (their newest state), and their timelines' lengths
    /// in ms (nil: open) where known.
    private var sits: [String: RoomSit] = [:]
    private var sitLengths: [String: Int64?] = [:]
    /// The states this node sent last, by sit (the broker echoes them a moment later).
    private var sent: [String: RoomSit] = [:]
    /// The sit this node plays: its id, the session, and what it is to be (pending changes
    /// counted: a pause decided for an instant ahead is `paused` already).
    private var sitID: String?
    private(set) var sitSession: Int?
    private var sitLocal: LocalSit = .none
    /// The instant (real-time ms) the sit's timeline began, as this node plays it: a newer
    /// playing state from another origin (a pause and resume this node missed) is joined again.
    private var sitOrigin: Int64?
    /// Times this node joined its sit again after missing the instant (at most 3 a sit).
    private var rejoins = 0
    /// What the sit's session here last left out to meet an instant, as logged.
    private var caughtUpLogged: Double?
    /// Changes for an instant: run by `runDue` on the loop's turns (the loop sleeps no
    /// longer than to the first), in the order of the sit's revisions.
    private struct Due {
        var at: UInt64
        var revision: Int
        var session: Int
        var action: Action
        enum Action { case pause, stop, resume(position: Int64, heardAt: UInt64) }
    }
    private var due: [Due] = []

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
    private func sitTopic(_ site: RoomName, _ id: String) -> String { "\(Self.prefix(site))/sit/\(id)" }

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
        client.subscribe("\(Self.prefix(new))/sit/+")
        sits = [:]
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
        if rest.hasPrefix("sit/") {
            take(sit: String(rest.dropFirst(4)), payload)
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

    /// A sit's state (every node's, this one's own included, from the broker): what this
    /// node does with it is Core's (RoomSit.step); here it is carried out.
    private func take(sit id: String, _ payload: [UInt8]) {
        guard RoomRing.isPeerWord(id) else { return }
        if payload.isEmpty { sits[id] = nil; sitLengths[id] = nil; return }      // cleared by its node
        let sit: RoomSit
        do throws(CoreError) {
            sit = try RoomSit(payload: payload)
            guard sit.id == id else { throw CoreError.badRequest(.same("its id is not its topic's")) }
        } catch {
            log.warning("rooms: ignored a sit: \(error.text(.en))")
            return
        }
        if let known = sits[id], known.revision >= sit.revision { return }     // an old state, or the same again
        guard sits.count < 100 || sits[id] != nil else {
            log.warning("rooms: ignored sit \(id): 100 sits are known already")
            return
        }
        sits[id] = sit
        guard let settings else { return }
        settle()
        var local: LocalSit = sitID == id ? sitLocal : .none
        var replacing: Int? = sitLocal == .none ? sitSession : nil
        if local == .playing, sit.phase == .playing, let origin = sitOrigin, abs(sit.atMilliseconds - sit.position - origin) > 2 {
            log.info("rooms: sit \(id) goes on from another point of its timeline than this node's (a change it missed): joins again")
            local = .none
            replacing = sitSession
        }
        if sitID != nil, sitID != id, sitLocal != .none, sit.phase == .playing,
           settings.room.map({ sit.rooms.includes($0) }) == true {
            log.warning("rooms: sit \(id) from \(sit.from) not joined: this node plays sit \(sitID ?? "") already")
            return
        }
        let here = settings.room.map { sit.rooms.includes($0) } ?? false
        if (here || sit.from == node), sitLengths[id] == nil { sitLengths[id] = host.sitLength(sit.timer) }
        let now = WallClock.milliseconds()
        let step = sit.step(room: settings.room, local: local, clock: ClockState.read(), boundMilliseconds: settings.clockBoundMilliseconds,
                            nowMilliseconds: now, lead: RoomSettings.leadMilliseconds, length: sitLengths[id] ?? nil)
        switch step {
        case .nothing, .notHere:
            return
        case .over, .tooFar, .clockUnfit:
            log.warning("rooms: \(step.text(sit))")
            return
        case .start(let at, let position, _):
            do throws(ProtocolError) {
                // A sit this node played before, its stop queued: that session is the one replaced.
                let session = try host.startPeerSit(sit.timer, from: position, heardAt: settings.monotonicInstant(realtimeMilliseconds: at),
                                                    replacing: replacing)
                if let replacing { due.removeAll { $0.session == replacing } }
                sitOrigin = at - position
                sitID = id
                sitSession = session
                sitLocal = .playing
                rejoins = 0
                log.info("rooms: \(step.text(sit)) in room \(settings.room?.text ?? "-") (session \(session))")
            } catch {
                log.warning("rooms: sit \(id) from \(sit.from) not played: \(error.words.en)")
            }
        case .pause(let at, _):
            guard let session = sitSession else { return }
            sitLocal = .paused
            due.append(Due(at: settings.monotonicInstant(realtimeMilliseconds: at), revision: sit.revision, session: session, action: .pause))
            log.info("rooms: \(step.text(sit))")
        case .resume(let at, let position):
            guard let session = sitSession else { return }
            sitLocal = .playing
            sitOrigin = at - position
            // At once (after any change before it): the device is made ready and silence
            // written up to the instant.
            due.append(Due(at: 0, revision: sit.revision, session: session,
                           action: .resume(position: position, heardAt: settings.monotonicInstant(realtimeMilliseconds: at))))
            log.info("rooms: \(step.text(sit))")
        case .stop(let at):
            guard let session = sitSession else { return }
            sitLocal = .none
            due.append(Due(at: settings.monotonicInstant(realtimeMilliseconds: at), revision: sit.revision, session: session, action: .stop))
            log.info("rooms: \(step.text(sit))")
        }
        runDue()
    }

    /// The sit this node played has ended by itself (its timeline's end, a failure): it is
    /// no longer this node's.
    private func settle() {
        guard let session = sitSession, due.isEmpty else { return }
        if host.activeSession != session && host.startingID != session {
            sitID = nil
            sitSession = nil
            sitLocal = .none
        }
    }

    /// Runs the changes whose instant has come (each with those of earlier revisions first).
    func runDue() {
        guard !due.isEmpty else {
            settle()
            noteCaughtUp()
            rejoinIfMissed()
            return
        }
        let now = MonotonicClock.nanoseconds()
        guard let last = due.filter({ $0.at <= now }).map(\.revision).max() else { return }
        let run = due.filter { $0.revision <= last }.sorted { $0.revision < $1.revision }
        due.removeAll { $0.revision <= last }
        for d in run {
            switch d.action {
            case .pause: host.pausePeerSit(d.session)
            case .resume(let position, let heardAt): host.resumePeerSit(d.session, from: position, heardAt: heardAt)
            case .stop:
                host.stopPeerSit(d.session)
                if sitSession == d.session { sitID = nil; sitSession = nil; sitLocal = .none }
            }
        }
    }

    /// A pause or resume of the sit made here alone (the broker was gone): what this node
    /// plays of it now.
    func changedHere(_ phase: RoomSit.Phase) {
        guard sitSession != nil else { return }
        sitLocal = phase == .paused ? .paused : (phase == .playing ? .playing : .none)
    }

    /// The one sit under way that this node started for other rooms than its own (nil: none,
    /// or more than one: which is meant is not known).
    var ownSitElsewhere: RoomSit? {
        let now = WallClock.milliseconds()
        let mine = sits.values.filter { sit in
            guard sit.from == node, sit.phase != .stopped, sit.id != sitID else { return false }
            if let length = sitLengths[sit.id] ?? nil, sit.position(at: now) >= length { return false }
            return true
        }
        return mine.count == 1 ? mine.first : nil
    }

    /// The sit's session here reached its start or resume a little late (a loaded machine)
    /// and left out that much of its first audio to be in step: said once, when it happens.
    private func noteCaughtUp() {
        guard let session = sitSession, let id = sitID, let skipped = host.sitCaughtUp(session) else {
            caughtUpLogged = nil
            return
        }
        guard skipped != caughtUpLogged else { return }
        caughtUpLogged = skipped
        log.info("rooms: sit \(id) reached its instant here \(LogFigures.milliseconds(skipped)) ms late: left out that much of its first audio, in step")
    }

    /// The sit's session here missed its instant (its device could not meet it, and it plays
    /// at no volume rather than late): it joins again a second ahead, at the point the
    /// timeline will have reached then, at most 3 times a sit.
    ///
    /// A miss may be known before the instant (the device held more than the time left,
    /// and what it held could not all be taken back): the step is then reckoned as at the
    /// instant, so that the new one is a second after it. Reckoned from now, the step kept
    /// the instant that was just missed, and the session made for it came out late and
    /// stayed so (a resume 71 ms behind the other rooms, in test_rooms beside a fuzzer).
    private func rejoinIfMissed() {
        guard let session = sitSession, let id = sitID, sitLocal == .playing, let sit = sits[id], let settings,
              let missed = host.sitMissedStart(session) else { return }
        guard rejoins < 3 else { return }
        rejoins += 1
        let step = sit.step(room: settings.room, local: .none, clock: ClockState.read(), boundMilliseconds: settings.clockBoundMilliseconds,
                            nowMilliseconds: max(WallClock.milliseconds(), sit.atMilliseconds),
                            lead: 1000,    // the session it replaces fades out first
                            length: sitLengths[id] ?? nil)
        guard case .start(let at, let position, _) = step else { return }
        do throws(ProtocolError) {
            let again = try host.startPeerSit(sit.timer, from: position, heardAt: settings.monotonicInstant(realtimeMilliseconds: at),
                                             replacing: session)
            sitSession = again
            sitOrigin = at - position
            log.warning("rooms: sit \(id) missed its instant here by \(Int(missed * 1000)) ms: joins again at \(position) ms of its timeline (session \(again))")
        } catch {
            log.warning("rooms: sit \(id) missed its instant here by \(Int(missed * 1000)) ms and cannot join again: \(error.words.en)")
        }
    }

    /// How long the loop may sleep before a change is due (nil: none).
    var dueWithinMs: Int32? {
        guard let first = due.map(\.at).min() else { return nil }
        let now = MonotonicClock.nanoseconds()
        return first <= now ? 0 : Int32(min(60_000, (first - now + 999_999) / 1_000_000))
    }

    /// The sit this node plays goes to `phase` for every node, a lead ahead (false: this
    /// node plays none, or it is in that phase already and nothing is sent).
    func change(_ phase: RoomSit.Phase) throws(ProtocolError) -> Bool {
        let id: String, known: RoomSit
        if let mine = sitID, let s = sits[mine] {
            id = mine
            known = s
        } else if let other = ownSitElsewhere {
            id = other.id
            known = other
        } else {
            return false
        }
        // What this node sent last may not be back from the broker yet (a pause, then a stop
        // at once): the next state is built on the newer, so that each has its own revision.
        let current = sent[id].map { $0.revision > known.revision ? $0 : known } ?? known
        // So already (or decided for an instant ahead), here too: nothing to send. A node that
        // paused alone while the broker was gone sends its resume all the same (the others,
        // playing, go on; it rejoins their timeline).
        let target: LocalSit = phase == .playing ? .playing : (phase == .paused ? .paused : .none)
        if current.phase == phase, sitID != id || sitLocal == target { return true }
        let next: RoomSit
        do throws(CoreError) { next = try current.next(phase, at: WallClock.milliseconds() + RoomSettings.leadMilliseconds) } catch {
            throw ProtocolError(error)
        }
        guard send(next) else {
            throw ProtocolError(.failed, both("the broker did not take the change (the connection was just lost)",
                                              "der Broker hat die Änderung nicht angenommen (die Verbindung ging eben verloren)"))
        }
        log.info("rooms: sit \(id) \(phase.rawValue) for every room at \(next.atMilliseconds)")
        return true
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

    /// A sit's state for every node, retained (a node that joins late plays from the
    /// point its timeline has reached); this one takes it back from the broker too.
    func send(_ sit: RoomSit) -> Bool {
        guard let client, let site else { return false }
        guard client.publish(sitTopic(site, sit.id), sit.payload, retain: true, qos: 1) else { return false }
        if sent.count >= 100 { sent = sent.filter { sits[$0.key] != nil } }
        sent[sit.id] = sit
        return true
    }

    /// This node's sits that are over (stopped, or their timeline ended) a minute ago:
    /// removed from the broker, so that it keeps no more than the sits under way.
    private func clearOver() {
        guard let client, let site else { return }
        let now = WallClock.milliseconds()
        for (id, sit) in sits where sit.from == node {
            var over = false
            switch sit.phase {
            case .stopped: over = now - sit.atMilliseconds > 60_000
            case .playing: if let length = sitLengths[id] ?? nil { over = sit.position(at: now) > length + 60_000 }
            case .paused: over = now - sit.atMilliseconds > 24 * 3_600_000
            }
            if over {
                client.publish(sitTopic(site, id), "", retain: true, qos: 1)
                sits[id] = nil
                sitLengths[id] = nil
                log.info("rooms: sit \(id) is over: removed from the broker")
            }
        }
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
        clearOver()
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
