// The daemon's MQTT part: the Home Assistant bridge. Started and stopped by the daemon in its
// order, on the daemon's thread only; the network is libmosquitto's own thread, so nothing
// here waits for the broker. It follows the `mqtt-*` settings (looked at when the settings
// file changes), announces the node through discovery, publishes the session's state and
// events, and turns command messages into the service's typed calls (holding no rule).
import FoundationEssentials
import Glibc
import Logging
import StillMomentAudio
import StillMomentCore

final class MQTTBridge {
    private let host: SessionService
    private let log: Logger
    private let version: String
    private var client: MQTTClient?
    /// The rooms' side of the connection (presence, rings), while the client runs.
    private var rooms: RoomsLink?
    /// The configuration the client runs with (nil: none runs).
    private var running: MQTTConfig?
    private var topics = MQTTTopics(node: "_")
    private var connected = false
    /// A connection failed since the last start or connection (said once in the log).
    private var failing = false
    /// The settings file as last seen (mtime, size, inode): read again only when it changed.
    private var seen: (Int, Int, Int, Int)?
    private var looked = false
    /// What Home Assistant chose and set (kept in the settings `mqtt-preset` and
    /// `mqtt-minutes`, read when the client starts).
    private var chosenPreset = HomeAssistantDiscovery.noPreset
    private var minutes: Int?
    /// The session last announced (an event entity's `started`), and today's practice.
    private var announcedSession: Int?
    private var todayMinutes = 0
    private var todayAt = 0.0
    private var todayDue: Double?
    private var lastState = ""
    private var lastRemainingSent = Int64.min

    init(host: SessionService, log: Logger, version: String) {
        self.host = host
        self.log = log
        self.version = version
    }

    /// Connected to the broker: Home Assistant follows the session's states.
    var isConnected: Bool { connected }

    /// MQTT is on: the daemon stays (Home Assistant needs it) rather than exit when idle.
    var keepsDaemon: Bool { running != nil }

    /// Something to publish soon (today's total after a session): the loop wakes for it.
    var dueWithinMs: Int32? {
        let today = connected ? todayDue.map { Int32(max(0, min(1000, ($0 - MonotonicClock.seconds()) * 1000))) } : nil
        // A sit in several rooms' change for an instant: due with the broker gone too.
        guard let sit = rooms?.dueWithinMs else { return today }
        return min(today ?? .max, sit)
    }

    /// The client's fd for the poll set (nil: none).
    var pollFD: Int32? { client?.fd }

    // MARK: the settings

    /// Looks at the settings file (a stat on each turn of the loop; read only when it
    /// changed) and starts, restarts or stops the client to match.
    func follow(force: Bool = false) {
        var st = stat()
        let id: (Int, Int, Int, Int)? = stat(Paths.settingsFile, &st) == 0
            ? (Int(st.st_mtim.tv_sec), Int(st.st_mtim.tv_nsec), Int(st.st_size), Int(st.st_ino)) : nil
        let same: Bool
        switch (seen, id) {
        case (nil, nil): same = true
        case let (a?, b?): same = a == b
        default: same = false
        }
        if !force && same && looked { return }
        looked = true
        seen = id
        let config: MQTTConfig
        let settings: Settings
        do {
            settings = try Settings.load()
            config = try MQTTConfig(settings)
        } catch {
            log.error("MQTT settings: \(error.text(.en))")
            return
        }
        if config.enabled && config.broker == nil { log.warning("MQTT: mqtt-enabled is on but mqtt-broker is empty (stillmoment mqtt enable --broker HOST)") }
        let wanted = config.enabled && config.broker != nil ? config : nil
        if wanted == running { rooms?.follow(settings); return }
        if let old = running {
            stop(removing: wanted == nil || wanted?.node != old.node)
        }
        if let wanted { start(wanted) }
        rooms?.follow(settings)
    }

    private func start(_ config: MQTTConfig) {
        guard let broker = config.broker else { return }
        topics = MQTTTopics(node: config.node)
        var password: String?
        if let file = config.passwordFile {
            do { password = try MQTTConfig.readPassword(file) } catch {
                log.error("MQTT: \(error.text(.en)); not connecting")
                return
            }
        }
        do {
            client = try MQTTClient(clientID: "stillmoment-\(topics.node)", broker: broker, user: config.user,
                                    password: password, tlsCA: config.tlsCA, will: topics.availability)
        } catch {
            log.error("\(error.text(.en)); MQTT stays off")
            return
        }
        running = config
        connected = false
        failing = false
        host.mqttLink = .init(broker: broker.description, node: topics.node, connected: false)
        let rooms = RoomsLink(host: host, log: log, version: version, node: topics.node)
        self.rooms = rooms
        host.roomsLink = rooms
        let settings = try? Settings.load()
        let preset = settings?.value("mqtt-preset") ?? ""
        chosenPreset = preset.isEmpty ? HomeAssistantDiscovery.noPreset : preset
        minutes = settings.flatMap { MQTTConfig.minutes($0.value("mqtt-minutes")) } ?? Self.settingsMinutes()
        log.info("MQTT: connecting to \(broker) as node \(topics.node)\(config.user.map { " (user \(Display.clean($0)))" } ?? "")\(config.tlsCA != nil ? " over TLS" : "")")
    }

    /// Stops the client: `removing` first empties the retained configs (`mqtt disable`), so
    /// Home Assistant drops the entities; then `offline`, and a clean disconnect.
    func stop(removing: Bool = false) {
        guard let c = client else { return }
        if removing && connected {
            // QoS 0: straight into the queue before the disconnect (QoS 1 may wait for acks).
            for e in HomeAssistantEntity.all { c.publish(topics.config(e), "", retain: true) }
            c.publish(topics.state, "", retain: true)
            rooms?.leave()
            log.info("MQTT: the entities were removed from Home Assistant")
        }
        rooms = nil
        host.roomsLink = nil
        c.close(availability: topics.availability)
        client = nil
        running = nil
        connected = false
        host.mqttLink = nil
        log.info("MQTT: disconnected")
    }

    // MARK: what came in

    /// Takes in what the network thread received (the poll said the fd is readable).
    func serve() {
        guard let c = client else { return }
        while let incoming = c.next() {
            switch incoming {
            case .connected(let code):
                guard code == 0 else {
                    log.error("MQTT: the broker refused the connection: \(Self.connack(code))")
                    continue
                }
                connected = true
                failing = false
                host.mqttLink?.connected = true
                log.info("MQTT: connected")
                c.subscribe(topics.commands)
                c.subscribe(MQTTTopics.homeAssistantStatus)
                announce()
                rooms?.connected(c)
            case .disconnected(let code):
                if connected {
                    log.warning("MQTT: connection lost (\(MQTTClient.strerror(code))); reconnecting")
                } else if !failing {
                    log.warning("MQTT: cannot connect (\(MQTTClient.strerror(code))); trying again, 1 s doubling to 60 s")
                }
                failing = !connected
                connected = false
                host.mqttLink?.connected = false
                rooms?.disconnected()
            case .dropped(let topic):
                log.warning("MQTT: a message on \(Display.clean(String(topic.prefix(120)))) was ignored: too long")
            case .message(let topic, let payload):
                receive(topic: topic, payload: payload)
            }
        }
    }

    private func receive(topic: String, payload: [UInt8]) {
        if rooms?.receive(topic: topic, payload: payload) == true { return }
        if topic == MQTTTopics.homeAssistantStatus {
            if payload == Array("online".utf8) {
                log.info("MQTT: Home Assistant came online: announcing the node again")
                announce()
            }
            return
        }
        let command: MQTTCommand?
        do {
            command = try MQTTCommand.parse(topic: topic, payload: payload, topics: topics)
        } catch {
            log.warning("MQTT: ignored a message on \(Display.clean(String(topic.prefix(120)))): \(error.description)")
            return
        }
        guard let command else { return }
        run(command)
    }

    /// A command as the service's typed call (or Core's service); a refusal is logged.
    private func run(_ command: MQTTCommand) {
        do throws(ProtocolError) {
            switch command {
            case .press(let button):
                switch button {
                case .start:
                    var options: [String: String] = [:]
                    if let minutes { options["duration"] = "\(minutes)m" }
                    _ = try host.call(.timer(TimerStartRequest(options: options)))
                case .startPreset:
                    let preset = chosenPreset == HomeAssistantDiscovery.noPreset ? nil : chosenPreset
                    _ = try host.call(.timer(TimerStartRequest(preset: preset)))
                case .pause: _ = try host.call(.pause)
                case .resume: _ = try host.call(.resume)
                case .finish: _ = try host.call(.finish)
                case .stop: _ = try host.call(.stop)
                case .bell: _ = try host.call(.ring(RingRequest()))   // the settings' gong, here
                }
                log.info("MQTT: \(button.rawValue) pressed")
            case .choosePreset(let name):
                let known = presetNames()
                guard name == HomeAssistantDiscovery.noPreset || known.contains(name) else {
                    log.warning("MQTT: no preset named '\(Display.clean(String(name.prefix(80))))'")
                    return
                }
                chosenPreset = name
                keep("mqtt-preset", name == HomeAssistantDiscovery.noPreset ? "" : name)
                publishState(force: true)
            case .setMinutes(let m):
                minutes = m
                keep("mqtt-minutes", "\(m)")
                publishState(force: true)
            case .schedules(let on):
                do throws(CoreError) {
                    try ScheduleService(store: host.store) {}.setOn(on)
                } catch {
                    throw ProtocolError(error)
                }
                _ = host.reschedule()
                publishState(force: true)
            }
        } catch {
            log.warning("MQTT: \(commandName(command)) refused: \(error.words.en)")
        }
    }

    /// Keeps Home Assistant's choice in the settings (under their lock: another writer's
    /// change is not lost); a failure is logged, the choice holds until the daemon stops.
    private func keep(_ key: String, _ value: String) {
        do throws(CoreError) {
            let catalog = try SoundCatalog.withCustomSounds(store: host.store)
            try Settings.update { settings throws(CoreError) in try settings.set(key, value, catalog: catalog) }
        } catch {
            log.warning("MQTT: cannot keep \(key): \(error.text(.en))")
        }
    }

    private func commandName(_ c: MQTTCommand) -> String {
        switch c {
        case .press(let b): return b.rawValue
        case .choosePreset: return "preset"
        case .setMinutes: return "minutes"
        case .schedules: return "schedules"
        }
    }

    // MARK: what goes out

    /// Whether the node was announced since the last call (the daemon then releases the
    /// code pages that reading the catalog touched, as after a session).
    func takeAnnounced() -> Bool {
        defer { announced = false }
        return announced
    }
    private var announced = false

    /// Discovery, availability and state (on connect, and when Home Assistant comes online).
    func announce() {
        guard let c = client, connected else { return }
        announced = true
        let discovery = HomeAssistantDiscovery(topics: topics, version: version, webURL: Self.webURL(), presets: presetNames())
        for (topic, payload) in discovery.all { c.publish(topic, payload, retain: true, qos: 1) }
        c.publish(topics.availability, "online", retain: true, qos: 1)
        refreshToday(now: MonotonicClock.seconds(), force: true)
        publishState(force: true)
    }

    /// Events as they go out to the socket's subscribers (the listener's observe hook):
    /// those of the loop's step and those a socket request caused (a `stop`, a `status`
    /// that looked at the engine). Published at the next `publishEvents` or `publish`.
    func observe(_ events: [Event]) {
        guard client != nil, connected else { return }
        pending += events
    }
    private var pending: [Event] = []
    /// `remaining` moved by 10 s or more since the state topic was last sent.
    private var remainingMoved = false

    /// The events observed so far, in order: each state change becomes the state topic
    /// with the phase it carries (a short phase is not lost when several changes come in
    /// one step), starts and ends the event entity's events. Called before the commands
    /// that came in are taken up, so that no older state goes out after theirs.
    func publishEvents() {
        let events = pending
        pending.removeAll()
        guard client != nil, connected else { return }
        for event in events {
            switch event {
            case .state(let s):
                if let id = s.session, id != announcedSession {
                    announcedSession = id
                    let type = s.source == .bell ? "bell" : "started"
                    var e: [String: JSON] = ["event_type": .string(type)]
                    if let source = s.source { e["source"] = .string(source.rawValue) }
                    client?.publish(topics.event, JSON.object(e).line, retain: false)
                }
                publishState(s, force: false)
            case .ended(let ended):
                if ended.source != .bell {
                    let e: JSON = .object(["event_type": .string("ended"), "reason": .string(ended.reason.rawValue),
                                           "source": .string(ended.source.rawValue)])
                    client?.publish(topics.event, e.line, retain: false)
                    // The log's entry is closed just after: read the day's total a moment later.
                    todayDue = MonotonicClock.seconds() + 0.5
                }
            case .progress(let s):
                if let r = s.remaining, abs(r - lastRemainingSent) >= 10_000 { remainingMoved = true }
            }
        }
    }

    /// The step's end: the events observed since `publishEvents` (the commands' own), the
    /// rooms' due work, today's minutes (after a session ends, and every 10 min), and the
    /// state topic when anything in it changed; `remaining` every 10 s.
    func publish() {
        rooms?.runDue()
        guard client != nil, connected else {
            pending.removeAll()
            todayDue = nil     // read again on the next connection's announce
            return
        }
        rooms?.tick(now: MonotonicClock.seconds())
        publishEvents()
        var changed = remainingMoved
        remainingMoved = false
        let now = MonotonicClock.seconds()
        if let due = todayDue, now >= due {
            todayDue = nil
            refreshToday(now: now, force: true)
            changed = true
        }
        refreshToday(now: now, force: false)
        publishState(force: changed)
    }

    private func publishState(force: Bool) {
        publishState(host.status(), force: force)
    }

    /// The state topic for `s` (retained), unless it says what was sent last and `force` is off.
    private func publishState(_ s: Status, force: Bool) {
        guard let c = client, connected else { return }
        let phase: String
        switch s.state {
        case .idle, .completed, .stopped: phase = "idle"
        case .starting: phase = "starting"
        case _ where s.paused == true: phase = "paused"
        case .preparation: phase = "preparation"
        case .startGong: phase = "start_gong"
        case .running: phase = "running"
        case .endGong: phase = "end_gong"
        case .playing: phase = "playing"
        case .bell: phase = "bell"
        }
        let sitting = phase != "idle" && (s.source == .timer || s.source == .guided)
        let remaining = phase == "idle" ? 0 : (s.remaining ?? 0)
        let scheduleOn = !host.scheduler.isOff
        let state: JSON = .object([
            "phase": .string(phase),
            "remaining": .number(Double(remaining / 1000)),
            "sitting": .string(sitting ? "ON" : "OFF"),
            "today": .number(Double(todayMinutes)),
            "next_sit": host.scheduler.next.map { .string(LocalTime.at(unix: $0.at).iso8601) } ?? .null,
            "preset": .string(chosenPreset),
            "minutes": .number(Double(minutes ?? 10)),
            "schedules": .string(scheduleOn ? "ON" : "OFF"),
        ])
        let line = state.line
        guard force || line != lastState else { return }
        lastState = line
        lastRemainingSent = remaining
        c.publish(topics.state, line, retain: true, qos: 0)
    }

    /// Today's minutes of practice from the log (after a session ends, and every 10 min).
    private func refreshToday(now: Double, force: Bool) {
        guard force || now - todayAt >= 600 else { return }
        todayAt = now
        if let stats = try? PracticeLog(store: host.store).stats(today: LocalTime.now().date) {
            todayMinutes = Int(stats.today.milliseconds / 60_000)
        }
    }

    private func presetNames() -> [String] {
        ((try? PresetStore(store: host.store).all()) ?? []).map(\.name)
    }

    /// The timer's minutes from the `duration` setting (10 when it cannot be read).
    private static func settingsMinutes() -> Int {
        guard let settings = try? Settings.load(),
              let ms = try? TimerRequest(text: ["duration": settings.value("duration")]).duration else { return 10 }
        return max(1, min(600, Int(ms / 60_000)))
    }

    /// The web app's address for the device page: `web-listen` when it is not loopback.
    static func webURL() -> String? {
        guard let settings = try? Settings.load() else { return nil }
        let listen = settings.value("web-listen")
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]) else { return nil }
        var address = String(listen[..<colon])
        if address.hasPrefix("127.") || address == "localhost" || address == "[::1]" || address.isEmpty { return nil }
        if address == "0.0.0.0" || address == "[::]" {
            var buf = [CChar](repeating: 0, count: 256)
            guard gethostname(&buf, buf.count - 1) == 0 else { return nil }
            address = MQTTConfig.text(buf)
        }
        guard address.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-_:[]".contains($0)) }) else { return nil }
        return "http://\(address):\(port)/"
    }

    private static func connack(_ code: Int32) -> String {
        switch code {
        case 1: return "protocol version refused"
        case 2: return "client id refused"
        case 3: return "broker unavailable"
        case 4: return "bad user name or password"
        case 5: return "not authorised"
        default: return "code \(code)"
        }
    }
}
