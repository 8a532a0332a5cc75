import FoundationEssentials
import Glibc
import Logging
import StillMomentAudio
import StillMomentCore
import Synchronization

extension ProtocolError {
    /// A core error as the daemon's answer: the device, the disk or catalog, or bad input.
    init(_ error: CoreError) {
        switch error.category {
        case .device: self.init(.device, error.description)
        case .failure: self.init(.failed, error.description)     // the disk, the catalog, a damaged file: not the request
        case .badInput: self.init(.badArguments, error.description)
        }
    }

    /// A time in milliseconds from a request: a finite number within ±`limit` (24 h).
    static func milliseconds(_ value: JSON?, _ name: String, limit: Double = 86_400_000) throws(ProtocolError) -> Int64? {
        guard let value else { return nil }
        guard let v = value.number, v.isFinite, abs(v) <= limit else {
            throw ProtocolError(.badArguments, "\(name) must be a number of milliseconds within ±\(Int64(limit))")
        }
        return Int64(v)
    }
}

/// One session running in the daemon, started and ended by its SessionRunner. Sendable:
/// the coordinator's conflict handler (which may run on whichever thread asks for the
/// device) stops it and records why.
final class HostedSession: Sendable {
    enum Kind: Sendable {
        case timer(TimerSession)
        case guided(GuidedSession, device: String)
        case bell(BellSession)
    }
    let id: Int
    let source: AudioSource
    let kind: Kind
    let runner: SessionRunner

    init(id: Int, source: AudioSource, kind: Kind, runner: SessionRunner) {
        self.id = id
        self.source = source
        self.kind = kind
        self.runner = runner
    }

    var engine: AudioEngine {
        switch kind {
        case .timer(let t): return t.engine
        case .guided(let g, _): return g.engine
        case .bell(let b): return b.engine
        }
    }

    /// Records why the session is ending (the first reason wins).
    func markEnding(_ why: EndReason) { runner.markEnding(why) }

    /// Stops at once with a short fade (the device is free afterwards).
    func stopNow(fade: Double) { runner.session.stop(fade: fade) }
}

/// What the daemon plays: the coordinator, the store, the session now playing, and a
/// guided meditation that a timer preempted (kept to be resumed). Every method runs on the
/// daemon's loop thread; the coordinator's handlers touch only `HostedSession`.
final class SessionHost {
    let store: LibraryStore
    let coordinator = AudioSessionCoordinator()
    let log: Logger
    private(set) var active: HostedSession?
    /// A guided meditation paused by a timer: its id, the file position and the device.
    private(set) var suspended: (meditation: Meditation, position: Int64, device: String)?
    private var lastEnded: JSON?
    private var nextID = 1
    private var lastStateKey = ""
    private var events: [JSON] = []

    init(store: LibraryStore, log: Logger) {
        self.store = store
        self.log = log
        practice = PracticeLog(store: store)
        scheduler = Scheduler(store: store, log: log)
        // Sessions that died with the last daemon are closed with what was heard.
        do {
            let closed = try practice.closeInterrupted()
            if closed > 0 { log.info("closed \(closed) practice-log entr\(closed == 1 ? "y" : "ies") of sessions that ended with the last daemon") }
        } catch {
            log.error("cannot read the practice log: \(error.description)")
        }
    }

    /// Where heard sessions are recorded (by their runner).
    let practice: PracticeLog
    /// The daemon's own clock for the schedule.
    let scheduler: Scheduler

    /// When the last sit or guided meditation ended (wall clock), for the bells' quiet.
    private(set) var lastSitEnded: Double?

    /// Keeps the daemon alive when idle: there are entries to ring.
    var keepsTime: Bool { scheduler.hasEntries }

    /// How long the loop may sleep: `cap`, or until the next scheduled entry.
    func pollTimeout(cap: Int32) -> Int32 { scheduler.timeout(cap: cap) }

    /// Runs what the schedule says is due now.
    func tickSchedule() { scheduler.tick(self) }

    var isIdle: Bool { active == nil }

    /// Events produced since the last call (state changes, ended sessions).
    func takeEvents() -> [JSON] {
        defer { events.removeAll() }
        return events
    }

    // MARK: commands

    func handle(_ command: ControlCommand, _ args: [String: JSON]) throws(ProtocolError) -> JSON {
        defer { reap() }
        switch command {
        case .status:
            return status()
        case .pause:
            guard let s = active else { throw ProtocolError(.noSession, "nothing is playing") }
            s.engine.pause()
            log.info("session \(s.id) paused")
            return status()
        case .resume:
            return try resume()
        case .stop:
            guard let s = active else { throw ProtocolError(.noSession, "nothing is playing") }
            s.markEnding(.stopped)
            // A paused engine has nothing to fade and finishes at once.
            s.engine.fadeOutAndFinish(over: Int64(s.engine.sampleRate))
            log.info("session \(s.id) stopping")
            return status()
        case .finish:
            guard let s = active else { throw ProtocolError(.noSession, "nothing is playing") }
            guard case .timer(let t) = s.kind else {
                throw ProtocolError(.badArguments, "finish ends a timer; a guided meditation is stopped with `stillmoment stop`")
            }
            if t.isPaused { t.resume() }
            s.markEnding(.finished)
            t.finish()
            log.info("session \(s.id) finishing")
            return status()
        case .reschedule:
            scheduler.reschedule()
            return status()
        case .ringNow:
            guard let n = args["id"]?.number, n == n.rounded(), abs(n) < 1e15 else {
                throw ProtocolError(.badArguments, "ring-now needs {\"id\": N}")
            }
            let entry: ScheduleEntry
            do { entry = try ScheduleStore(store: store).require(String(Int64(n))) } catch { throw ProtocolError(error) }
            scheduler.run(entry, at: Int64(Scheduler.wallClock()), host: self, now: Scheduler.wallClock(), manual: true)
            return status()
        case .seek:
            return try seek(args)
        case .timer:
            return try startTimer(args)
        case .play:
            return try startGuided(args)
        case .subscribe:
            return status()          // the connection keeps the subscription itself
        case .unsubscribe:
            return .object([:])
        }
    }

    private func resume() throws(ProtocolError) -> JSON {
        if let s = active {
            if s.engine.state == .paused {
                s.engine.resume()
                log.info("session \(s.id) resumed")
                return status()
            }
            if let pending = suspended {
                throw ProtocolError(.badArguments, "a \(s.source.rawValue) is playing; stop it first, then `resume` continues \(pending.meditation.name)")
            }
            throw ProtocolError(.noSession, "nothing is paused")
        }
        guard let pending = suspended else { throw ProtocolError(.noSession, "nothing is paused") }
        let from = max(0, pending.position - (pending.meditation.trimStart ?? 0))
        return try startGuided(meditation: pending.meditation, from: from, preparation: 0, device: pending.device, preview: false)
    }

    private func seek(_ args: [String: JSON]) throws(ProtocolError) -> JSON {
        guard let s = active else { throw ProtocolError(.noSession, "nothing is playing") }
        guard case .guided(let g, _) = s.kind else {
            throw ProtocolError(.badArguments, "a timer keeps its time; seek works on guided meditations")
        }
        if let by = try ProtocolError.milliseconds(args["by"], "by") {
            g.seek(by: by)
        } else if let to = try ProtocolError.milliseconds(args["to"], "to"), to >= 0 {
            g.seek(toFile: to)
        } else {
            throw ProtocolError(.badArguments, "seek needs {\"by\": milliseconds} or {\"to\": milliseconds}")
        }
        return status()
    }

    private func startTimer(_ args: [String: JSON]) throws(ProtocolError) -> JSON {
        var options: [String: String] = [:]
        if case .object(let o)? = args["options"] {
            for (k, v) in o {
                guard let text = v.string else { throw ProtocolError(.badArguments, "option \(k) must be a string") }
                options[k] = text
            }
        }
        let catalog: SoundCatalog
        let configuration: TimerConfiguration
        var preset: Preset?
        do throws(CoreError) {
            catalog = try SoundCatalog.withCustomSounds(store: store)
            if let name = args["preset"] {
                guard let text = name.string else { throw CoreError.badValue(option: "preset", reason: "must be a name") }
                preset = try PresetStore(store: store).require(text)
            }
            configuration = try TimerConfiguration(settings: try Settings.load(), preset: preset,
                                                   options: try TimerRequest(text: options), catalog: catalog)
        } catch {
            throw ProtocolError(error)
        }
        return started(try launchTimer(configuration, catalog: catalog, preset: preset?.name, scheduled: false))
    }

    /// Starts a timer session (the device claimed for it); returns its id.
    private func launchTimer(_ configuration: TimerConfiguration, catalog: SoundCatalog, preset: String?,
                             scheduled: Bool) throws(ProtocolError) -> Int {
        let id = claim(.timer)
        let session: TimerSession
        let runner: SessionRunner
        do {
            session = try TimerSession(configuration: configuration, catalog: catalog,
                                       output: .device(DeviceConfiguration(name: configuration.device)))
            runner = try SessionRunner(session, log: practice, preset: preset, scheduled: scheduled)
        } catch {
            coordinator.release(.timer)
            throw ProtocolError(error)
        }
        begin(HostedSession(id: id, source: .timer, kind: .timer(session), runner: runner))
        log.info("session \(id): \(scheduled ? "scheduled " : "")\(session.summary) on \(configuration.device)")
        return id
    }

    // MARK: scheduled work (nothing that plays is ever interrupted)

    /// Whether nothing plays (a scheduled entry may start).
    var deviceFree: Bool {
        reap()
        return active == nil
    }

    /// A scheduled sit: a preset and/or options over the settings.
    func startScheduledTimer(preset name: String?, request: TimerRequest) throws(ProtocolError) -> Int {
        let catalog: SoundCatalog
        let configuration: TimerConfiguration
        var preset: Preset?
        do throws(CoreError) {
            catalog = try SoundCatalog.withCustomSounds(store: store)
            if let name { preset = try PresetStore(store: store).require(name) }
            configuration = try TimerConfiguration(settings: try Settings.load(), preset: preset, options: request, catalog: catalog)
        } catch {
            throw ProtocolError(error)
        }
        return try launchTimer(configuration, catalog: catalog, preset: preset?.name, scheduled: true)
    }

    /// A scheduled guided meditation.
    func startScheduledPlay(meditation key: String) throws(ProtocolError) -> Int {
        let m: Meditation
        let device: String
        do throws(CoreError) {
            m = try store.find(key)
            device = try Settings.load().value("device")
        } catch {
            throw ProtocolError(error)
        }
        return try launchGuided(meditation: m, from: 0, preparation: 0, device: device, preview: false, scheduled: true)
    }

    /// A bell only, when nothing plays.
    func ringBell(sound id: String, strikes: Int, volume: Double) throws(ProtocolError) -> Int {
        let session: BellSession
        let device: String
        do throws(CoreError) {
            let catalog = try SoundCatalog.withCustomSounds(store: store)
            device = try Settings.load().value("device")
            session = try BellSession(sound: try catalog.gong(id), strikes: strikes, volume: volume, catalog: catalog,
                                      output: .device(DeviceConfiguration(name: device)))
        } catch {
            throw ProtocolError(error)
        }
        let sid = claim(.bell)
        let runner: SessionRunner
        do { runner = try SessionRunner(session) } catch {
            coordinator.release(.bell)
            throw ProtocolError(error)
        }
        begin(HostedSession(id: sid, source: .bell, kind: .bell(session), runner: runner))
        log.info("session \(sid): bell \(id) ×\(strikes) on \(device)")
        return sid
    }

    private func startGuided(_ args: [String: JSON]) throws(ProtocolError) -> JSON {
        guard let key = args["id"]?.string else { throw ProtocolError(.badArguments, "play needs {\"id\": \"UUID or name\"}") }
        let preview = args["preview"] == .bool(true)
        let m: Meditation
        do { m = try store.find(key) } catch { throw ProtocolError(error) }
        var from = try ProtocolError.milliseconds(args["from"], "from") ?? 0
        // A saved position before the trim start (the trim was edited since) starts at the trim.
        if args["resume"] == .bool(true), let last = m.lastPosition { from = max(0, last - (m.trimStart ?? 0)) }
        let preparation = try ProtocolError.milliseconds(args["preparation"], "preparation") ?? 0
        guard from >= 0, preparation >= 0 else { throw ProtocolError(.badArguments, "from and preparation cannot be negative") }
        let device: String
        if let d = args["device"]?.string {
            device = d
        } else {
            do { device = try Settings.load().value("device") } catch { throw ProtocolError(error) }
        }
        return try startGuided(meditation: m, from: from, preparation: preparation, device: device, preview: preview)
    }

    private func startGuided(meditation m: Meditation, from: Int64, preparation: Int64, device: String,
                             preview: Bool) throws(ProtocolError) -> JSON {
        started(try launchGuided(meditation: m, from: from, preparation: preparation, device: device, preview: preview,
                                 scheduled: false))
    }

    private func launchGuided(meditation m: Meditation, from: Int64, preparation: Int64, device: String,
                              preview: Bool, scheduled: Bool) throws(ProtocolError) -> Int {
        let source: AudioSource = preview ? .preview : .guided
        let id = claim(source)
        let session: GuidedSession
        let runner: SessionRunner
        do {
            let catalog = try SoundCatalog.withCustomSounds(store: store)
            let output = SessionOutput.device(DeviceConfiguration(name: device))
            if preview {
                let trimStart = m.trimStart ?? 0, trimEnd = m.trimEnd ?? m.durationMilliseconds
                let window = min(10_000, trimEnd - trimStart)
                session = try GuidedSession(meditation: m, store: store, catalog: catalog, output: output,
                                            from: (trimEnd - trimStart) / 2 - window / 2, window: window)
            } else {
                session = try GuidedSession(meditation: m, store: store, catalog: catalog, output: output,
                                            preparation: preparation, from: from)
            }
            runner = try SessionRunner(session, log: practice, scheduled: scheduled)
        } catch {
            coordinator.release(source)
            throw ProtocolError(error)
        }
        if !preview { suspended = nil }      // a new guided meditation replaces the one kept
        begin(HostedSession(id: id, source: source, kind: .guided(session, device: device), runner: runner))
        log.info("session \(id): \(scheduled ? "scheduled: " : "")\(preview ? "preview of" : "playing") \(m.name) (\(m.id)) on \(device)")
        return id
    }

    /// Takes the device for `source`: the session playing now ends first (a timer stops,
    /// a guided meditation is kept to be resumed; a session of the same kind is replaced).
    private func claim(_ source: AudioSource) -> Int {
        reap()               // a session that just ended is over, not replaced or preempted
        if let s = active, s.source == source {
            s.markEnding(.replaced)
            s.stopNow(fade: 0.3)
        }
        coordinator.request(source) { _ in }
        reap()
        defer { nextID += 1 }
        return nextID
    }

    /// The answer to a start: the status, always with the new session's id (on a device
    /// that never blocks, the session may be over already).
    private func started(_ id: Int) -> JSON {
        guard case .object(var o) = status() else { return status() }
        if o["session"] == nil { o["session"] = .number(Double(id)) }
        return .object(o)
    }

    private func begin(_ session: HostedSession) {
        active = session
        // Re-register with the handler that knows this session: another source's request
        // stops it (or pauses a guided meditation, which is kept to be resumed).
        coordinator.request(session.source) { [session] requester in
            session.markEnding(.preempted(by: requester.rawValue))
            session.stopNow(fade: 0.5)
        }
        reap()
    }

    // MARK: the loop's tick

    /// Ends a session whose engine is done, and notes state changes as events.
    func reap() {
        if let s = active {
            let engineState = s.engine.state
            if engineState == .finished || engineState == .stopped || engineState == .failed {
                finish(s, engineState: engineState)
            } else {
                savePositionPeriodically(s)
            }
        }
        let key = stateKey()
        if key != lastStateKey {
            lastStateKey = key
            events.append(.object(["event": .string("state"), "data": status()]))
        }
    }

    /// How often a playing guided meditation's position is saved, so a daemon that is
    /// killed or crashes loses at most this much of it (one small catalog update).
    static let positionSaveInterval: Int64 = 5_000
    private var lastPositionSave: (session: Int, at: Int64, position: Int64)?

    private func savePositionPeriodically(_ s: HostedSession) {
        let now = Self.monotonicMilliseconds()
        if let last = lastPositionSave, last.session == s.id, now - last.at < Self.positionSaveInterval { return }
        s.runner.checkpoint()
        guard case .guided(let g, _) = s.kind, s.source == .guided else {
            lastPositionSave = (s.id, now, 0)
            return
        }
        let position = g.filePosition
        if let last = lastPositionSave, last.session == s.id, last.position == position {
            lastPositionSave = (s.id, now, position)   // paused: nothing new to write
            return
        }
        lastPositionSave = (s.id, now, position)
        do { try g.savePosition() } catch { log.error("cannot save the position: \(error.description)") }
    }

    static func monotonicMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Ends a session that is over, through its runner (the one place sessions end:
    /// the device released, a guided meditation's position saved).
    private func finish(_ s: HostedSession, engineState: AudioEngine.State) {
        var reason = s.runner.finish().endReason
        if engineState == .failed, reason.name != "failed" { reason = .failed("the sound device failed") }
        var info: [String: JSON] = ["session": .number(Double(s.id)), "source": .string(s.source.rawValue),
                                    "reason": .string(reason.name)]
        if case .preempted(let by) = reason { info["by"] = .string(by) }
        if case .failed(let message) = reason { info["message"] = .string(message) }
        if case .guided(let g, let device) = s.kind {
            let position = g.filePosition
            info["position"] = .number(Double(position))
            if s.source == .guided {
                if case .preempted = reason, g.position < g.voiceEnd {
                    suspended = (g.meditation, position, device)
                }
            }
        }
        coordinator.release(s.source)
        active = nil
        let ended = JSON.object(["event": .string("ended"), "data": .object(info)])
        lastEnded = .object(info)
        if s.source == .timer || s.source == .guided { lastSitEnded = Scheduler.wallClock() }
        events.append(ended)
        if case .failed(let message) = reason {
            log.error("session \(s.id) failed: \(message)")
        } else {
            log.info("session \(s.id) \(reason.name)")
        }
    }

    /// Ends the session playing now (SIGTERM): a 1-s fade, the position saved, the device released.
    func shutdown() {
        guard let s = active else { return }
        s.markEnding(.stopped)
        s.stopNow(fade: 1.0)
        reap()
    }

    private func stateKey() -> String {
        guard let s = active else { return "idle|\(suspended?.meditation.id ?? "")" }
        let paused = s.engine.state == .paused
        switch s.kind {
        case .timer(let t): return "\(s.id)|\(t.plan.state(at: t.position).rawValue)|\(paused)"
        case .guided: return "\(s.id)|guided|\(paused)"
        case .bell: return "\(s.id)|bell|\(paused)"
        }
    }

    // MARK: status

    /// What is playing, as the answer to `status` and the payload of events.
    func status() -> JSON {
        var o: [String: JSON] = [:]
        if let p = suspended {
            o["suspended"] = .object(["id": .string(p.meditation.id), "name": .string(p.meditation.name),
                                      "position": .number(Double(p.position))])
        }
        if let e = lastEnded { o["lastEnded"] = e }
        if let next = scheduler.nextJSON { o["nextScheduled"] = next }
        guard let s = active else {
            o["state"] = .string("idle")
            return .object(o)
        }
        let engine = s.engine
        o["session"] = .number(Double(s.id))
        o["source"] = .string(s.source.rawValue)
        o["paused"] = .bool(engine.state == .paused)
        if let stats = engine.statistics {
            // Underruns: those the device reported, and those we prevented by writing
            // silence because the ring ran dry (both mean the producer was late).
            o["underruns"] = .number(Double(stats.xruns + stats.silenceEvents))
            o["xruns"] = .number(Double(stats.xruns))
            o["silences"] = .number(Double(stats.silenceEvents))
            o["realtime"] = .bool(stats.realtime == true)
            o["device"] = .string(engine.deviceInfo?.name ?? "")
        }
        switch s.kind {
        case .timer(let t):
            let p = t.position
            let plan = t.plan
            o["state"] = .string(t.state == .completed || t.state == .stopped ? plan.state(at: p).rawValue : t.state.rawValue)
            o["elapsed"] = .number(Double(plan.elapsed(at: p)))
            o["remaining"] = .number(Double(plan.remaining(at: p)))
            o["duration"] = .number(Double(t.configuration.duration))
            if t.configuration.openEnded {
                o["open"] = .bool(true)
                o.removeValue(forKey: "remaining")
            }
            if let section = plan.section(at: p) {
                o["section"] = .object(["index": .number(Double(section.index)), "kind": .string(section.kind.rawValue),
                                        "remaining": .number(Double(section.remaining)),
                                        "count": .number(Double(plan.sections?.list.count ?? 0))])
            }
            if let next = plan.nextGong(after: p), next > plan.meditationStart {
                o["nextGong"] = .number(Double(plan.milliseconds(next - plan.meditationStart)))
            }
        case .guided(let g, _):
            let m = g.meditation
            // Before the voice: the preparation, then the start gong and its pause, with
            // the time until the voice begins.
            let p = g.position
            o["state"] = .string(p < g.preparationEnd ? "preparation" : p < g.voiceStart ? "startGong" : "playing")
            if p < g.voiceStart {
                o["startsIn"] = .number(Double((g.voiceStart - p) * 1000 / Int64(g.engine.sampleRate)))
            }
            o["meditation"] = .object(["id": .string(m.id), "name": .string(m.name), "teacher": .string(m.teacher)])
            o["position"] = .number(Double(g.filePosition))
            o["duration"] = .number(Double(m.trimEnd ?? m.durationMilliseconds))
        case .bell(let b):
            o["state"] = .string("bell")
            o["sound"] = .string(b.sound.id)
        }
        return .object(o)
    }
}
