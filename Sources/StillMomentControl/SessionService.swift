// The daemon's service: what plays, as typed calls. It owns the session playing, a guided
// meditation kept to be resumed and the schedule's clock; it knows no
// socket. Its callers (the Unix-socket listener today, any other listener tomorrow) call
// it on one thread and never wait for the sound device: fades, stops, replacements,
// pauses and seeks run on the device worker, and status answers at once.
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
        case .device: self.init(.device, error.words)
        case .failure: self.init(.failed, error.words)     // the disk, the catalog, a damaged file: not the request
        case .badInput: self.init(.badArguments, error.words)
        }
    }
}

public final class SessionService: ScheduleHost {
    let store: LibraryStore
    let log: Logger
    let worker = DeviceWorker()
    private let slot = StartSlot()
    /// The session playing (its device open).
    private(set) var active: HostedSession?
    /// A session being opened on the worker (after the one before has faded out).
    private var starting: Starting?
    /// A session asked for while the one before fades out: what it will be, and what its
    /// callers asked of it meanwhile (a pause is kept and carried out once it has begun).
    private struct Starting {
        let id: Int
        let kind: SessionKind
        var cancelled: EndReason?
        let meditation: Status.MeditationRef?
        /// Where a guided meditation starts in its file (ms) and its length: what the
        /// answer to a play or a resume says while the device opens.
        let position: Int64?
        let duration: Int64?
        /// The part of the file a seek may go to (the trim range).
        let range: ClosedRange<Int64>?
        var paused = false
        /// Where a seek asked while it opens goes (ms in the file): carried out once it plays.
        var seekTarget: Int64?
    }
    /// A guided meditation paused by a timer: the meditation, the file position, the device.
    private(set) var suspended: (meditation: Meditation, position: Int64, device: DeviceName)?
    private var lastEnded: Ended?
    private var nextID = 1
    private var lastStateKey = ""
    private var events: [Event] = []
    private var lastProgress: Int64 = 0
    /// How many times what is stored was read again (`reschedule`).
    private(set) var rereads = 0
    /// The MQTT bridge's link, for the status (set by the bridge; nil while MQTT is off).
    var mqttLink: Status.MQTTLink?
    /// The rooms' side of the MQTT link, while it runs (Rooms/RoomsLink.swift).
    var roomsLink: RoomsLink?

    /// Where heard sessions are recorded (by their runner).
    let practice: PracticeLog
    /// The daemon's own clock for the schedule.
    let scheduler: Scheduler
    /// Whether the device stays open between sessions (output-standby).
    private let standby: StandbyKeeper
    /// When the last sit or guided meditation ended (wall clock), for the bells' quiet.
    private(set) var lastSitEnded: Double?

    /// The hooks run when a sit or a guided meditation starts and ends (HookRunner: each
    /// on a thread of its own, never this one's or a session's).
    let hooks: HookRunner

    init(store: LibraryStore, log: Logger, hooks: HookRunner? = nil) {
        self.store = store
        self.log = log
        self.hooks = hooks ?? HookRunner(hooks: (try? HookStore(store: store).all()) ?? [], log: log)
        practice = PracticeLog(store: store)
        scheduler = Scheduler(store: store, log: log)
        standby = StandbyKeeper(log: log)
        // Sessions that died with the last daemon are closed with what was heard.
        do {
            let closed = try practice.closeInterrupted()
            if closed > 0 { log.info("closed \(closed) practice-log entr\(closed == 1 ? "y" : "ies") of sessions that ended with the last daemon") }
        } catch {
            log.error("cannot read the practice log: \(error.description)")
        }
    }

    /// Readable when the device worker has finished something: call `tick()`.
    var wakeFD: Int32 { worker.wakeFD }

    /// Keeps the daemon alive when idle: there are entries to ring.
    var keepsTime: Bool { scheduler.hasEntries }

    /// How long the caller's loop may sleep: `cap`, or until the next scheduled entry.
    func pollTimeout(cap: Int32) -> Int32 { scheduler.timeout(cap: cap) }

    /// Nothing plays, nothing is starting, nothing is being closed.
    var isIdle: Bool { active == nil && starting == nil && !worker.isBusy }

    /// The session playing now (nil: none), for the daemon's housekeeping.
    var activeSession: Int? { active?.id }

    /// Events since the last call: state changes, ended sessions, progress once a second.
    func takeEvents() -> [Event] {
        defer { events.removeAll() }
        return events
    }

    /// The service's heartbeat: takes in what the worker finished, ends sessions that are
    /// over, runs what the schedule says is due, and adds a progress event once a second.
    func tick() {
        reap()
        scheduler.tick(self)
        standby.update(nextAt: scheduler.next?.at, nextDevice: nextScheduledDevice(), idle: isIdle, worker: worker)
        let now = MonotonicClock.milliseconds()
        if active != nil, now - lastProgress >= 1000 {
            lastProgress = now
            events.append(.progress(status()))
        }
    }

    /// The device the next scheduled entry will open, for the standby: a timer's own
    /// --device, else its preset's; nil means the `device` setting. Looked up once per
    /// entry and time (a preset is a catalog read), not on every tick.
    private func nextScheduledDevice() -> DeviceName? {
        guard let next = scheduler.next, case .timer(let preset, let request) = next.entry.action else { return nil }
        if let device = request.device { return device }
        guard let preset else { return nil }
        if let cached = nextDeviceCache, cached.entry == next.entry.id, cached.at == next.at { return cached.device }
        // A preset that is gone or unreadable: the session will say so; the setting meanwhile.
        let device = preset.id.flatMap { try? PresetStore(store: store).find(id: $0) }?.request.device
        nextDeviceCache = (next.entry.id, next.at, device)
        return device
    }
    private var nextDeviceCache: (entry: Int64, at: Int64, device: DeviceName?)?

    // MARK: commands

    func pause() throws(ProtocolError) -> Status {
        defer { reap() }
        if let s = try roomSitChange(.paused) { return s }
        if active == nil, let st = starting, st.cancelled == nil {
            // Kept: the session begins paused (a pause asked during the fade before it).
            starting?.paused = true
            log.info("session \(st.id) paused while starting")
            return status()
        }
        let s = try playing()
        if !s.paused.exchange(true, ordering: .acquiringAndReleasing) {
            s.command(on: worker, "pause") { s.session.pause() }
            log.info("session \(s.id) paused")
        }
        return status()
    }

    func resume() throws(ProtocolError) -> Status {
        defer { reap() }
        if let s = try roomSitChange(.playing) { return s }
        if let s = active {
            if s.paused.exchange(false, ordering: .acquiringAndReleasing) {
                s.command(on: worker, "resume") { s.session.resume() }
                log.info("session \(s.id) resumed")
                return status()
            }
            if let pending = suspended {
                throw ProtocolError(.badArguments, both("a \(s.kind.rawValue) is playing; stop it first, then `resume` continues \(pending.meditation.name)",
                                                      "es spielt: \(s.kind.rawValue); beende das zuerst, dann setzt `resume` \(pending.meditation.name) fort"))
            }
            throw ProtocolError(.noSession, both("nothing is paused", "nichts ist pausiert"))
        }
        if let st = starting, st.cancelled == nil {
            if st.paused {
                starting?.paused = false
                log.info("session \(st.id) resumed while starting")
                return status()
            }
            if let pending = suspended {
                throw ProtocolError(.badArguments, both("a \(st.kind.rawValue) is starting; stop it first, then `resume` continues \(pending.meditation.name)",
                                                      "es startet: \(st.kind.rawValue); beende das zuerst, dann setzt `resume` \(pending.meditation.name) fort"))
            }
            throw ProtocolError(.noSession, both("nothing is paused", "nichts ist pausiert"))
        }
        guard let pending = suspended else { throw ProtocolError(.noSession, both("nothing is paused", "nichts ist pausiert")) }
        let from = max(0, pending.position - (pending.meditation.trimStart ?? 0))
        return try startGuided(meditation: pending.meditation, from: from, preparation: 0, device: pending.device, preview: false)
    }

    func stop() throws(ProtocolError) -> Status {
        defer { reap() }
        if let s = try roomSitChange(.stopped) { return s }
        return try stopLocal()
    }

    /// The session starting (not cancelled), by id.
    var startingID: Int? { starting.flatMap { $0.cancelled == nil ? $0.id : nil } }

    /// Stops what plays here (a sit in several rooms: this node's part).
    func stopLocal() throws(ProtocolError) -> Status {
        if active == nil, let s = starting, s.cancelled == nil {
            starting?.cancelled = .stopped
            slot.want(0)          // if it has not opened the device yet, it never will
            log.info("session \(s.id) stopped while starting")
            return status()
        }
        let s = try playing()
        s.markEnding(.stopped)
        // A paused engine has nothing to fade and finishes at once. On the worker: after
        // any pause or seek asked before.
        s.command(on: worker, "stop") { s.engine.fadeOutAndFinish(over: Int64(s.engine.sampleRate)) }
        log.info("session \(s.id) stopping")
        return status()
    }

    func finish() throws(ProtocolError) -> Status {
        defer { reap() }
        let s = try playing()
        if roomsLink?.sitSession == s.id {
            throw ProtocolError(.badArguments, both("a sit in several rooms is ended with `stillmoment stop` (it reaches every room at one instant; finish would not)",
                                                  "eine Sitzung in mehreren Räumen endet mit `stillmoment stop` (das erreicht alle Räume im selben Augenblick; finish nicht)"))
        }
        guard case .timer(let t) = s.player else {
            throw ProtocolError(.badArguments, both("finish ends a timer; a guided meditation is stopped with `stillmoment stop`",
                                                  "finish beendet einen Timer; eine geführte Meditation endet mit `stillmoment stop`"))
        }
        s.markEnding(.finished)
        let wasPaused = s.paused.exchange(false, ordering: .acquiringAndReleasing)
        s.command(on: worker, "finish") {
            if wasPaused { t.resume() }
            t.finish()
        }
        log.info("session \(s.id) finishing")
        return status()
    }

    /// `receivedAt`: when the request was read from its client (MonotonicClock ns); the
    /// request's own `at` (its user's moment, on this machine's clock) when it is earlier,
    /// by at most a second (another machine's or namespace's clock, or a stale stamp, is
    /// not believed).
    func seek(_ request: SeekRequest, receivedAt: UInt64? = nil) throws(ProtocolError) -> Status {
        defer { reap() }
        // Asked while the device opens: kept, and carried out once it plays (as a pause is).
        if active == nil, let st = starting, st.cancelled == nil, let range = st.range, let from = st.position {
            let now = st.seekTarget ?? from
            let target: Int64
            switch request.target {
            case .by(let ms): target = min(max(range.lowerBound, now + ms), range.upperBound)
            case .to(let ms): target = min(max(range.lowerBound, ms), range.upperBound)
            }
            starting?.seekTarget = target
            log.info("session \(st.id) will seek to \(target) ms once it plays (from \(now) ms)")
            return status()
        }
        let s = try playing()
        guard let g = s.guided else {
            throw ProtocolError(.badArguments, both("a timer keeps its time; seek works on guided meditations",
                                                  "ein Timer hält seine Zeit; seek gilt für geführte Meditationen"))
        }
        // The target is decided now, in the file's time, from where it plays (or where
        // a seek still under way goes): a relative seek means what the caller saw, however
        // long the device takes. The worker moves it there. Where it played when the
        // request came in, if it played on undisturbed since (nothing paused or queued, no
        // command after it): a request that waited behind others, or a daemon slow to
        // reach it, would land late by that much (2-3 ms in the sound-card rig's guest).
        let length = g.meditation.trimEnd ?? g.meditation.durationMilliseconds
        let start = g.meditation.trimStart ?? 0
        var asked = receivedAt
        if let stamp = request.at, stamp >= 0 {
            let arrival = receivedAt ?? MonotonicClock.nanoseconds()
            let (clientNs, overflow) = UInt64(stamp).multipliedReportingOverflow(by: 1000)
            if !overflow, clientNs <= arrival, arrival - clientNs < 1_000_000_000 { asked = clientNs }
        }
        let now: Int64
        if let pending = s.seekTarget.withLock({ $0 }) {
            now = pending
        } else if let at = asked, !s.paused.load(ordering: .acquiring), s.queued.load(ordering: .acquiring) == 0,
                  s.commandedAt.load(ordering: .acquiring) < at, MonotonicClock.nanoseconds() - at < 1_000_000_000 {
            now = g.filePosition(heardAt: at)
        } else {
            now = g.filePosition
        }
        let target: Int64
        switch request.target {
        case .by(let ms): target = min(max(start, now + ms), length)
        case .to(let ms): target = min(max(start, ms), length)
        }
        s.seekTarget.withLock { $0 = target }
        log.info("session \(s.id) seeks to \(target) ms (from \(now) ms)")
        s.command(on: worker, "seek") {
            g.seek(toFile: target)
            s.seekTarget.withLock { if $0 == target { $0 = nil } }
        }
        return status()
    }

    /// Read again what is stored: the schedule, the hooks, and (counted in `rereads`, which
    /// the daemon's button watcher follows) the buttons. The CLI asks it after a change.
    func reschedule() -> Status {
        scheduler.reschedule()
        if let list = try? HookStore(store: store).all() { hooks.reload(list) }
        rereads += 1
        return status()
    }

    func ringNow(_ id: Int64) throws(ProtocolError) -> Status {
        defer { reap() }
        let entry: ScheduleEntry
        do { entry = try ScheduleStore(store: store).require(String(id)) } catch { throw ProtocolError(error) }
        if let problem = entry.problem {
            throw ProtocolError(.failed, both("entry \(entry.id) cannot ring: \(problem.text(.en))", "Eintrag \(entry.id) kann nicht läuten: \(problem.text(.de))"))
        }
        scheduler.run(entry, at: Int64(Scheduler.wallClock()), host: self, now: Scheduler.wallClock(), manual: true)
        if let last = scheduler.lastRecorded, last.entry == entry.id, last.outcome == .failed || last.outcome == .skipped {
            throw ProtocolError(.failed, both("entry \(entry.id) \(last.outcome.rawValue): \(last.detail ?? "")", "Eintrag \(entry.id) \(last.outcome == .failed ? "fehlgeschlagen" : "ausgelassen"): \(last.detail ?? "")"))
        }
        return status()
    }

    func startTimer(_ request: TimerStartRequest) throws(ProtocolError) -> Status {
        defer { reap() }
        let catalog: SoundCatalog
        let configuration: TimerConfiguration
        var preset: Preset?
        do throws(CoreError) {
            catalog = try SoundCatalog.withCustomSounds(store: store)
            if let name = request.preset { preset = try PresetStore(store: store).require(name) }
            configuration = try TimerConfiguration(settings: try Settings.load(), preset: preset,
                                                   options: try request.request(), catalog: catalog)
        } catch {
            throw ProtocolError(error)
        }
        if let rooms = request.rooms {
            return try startRoomSit(configuration, preset: preset, options: request, rooms: rooms)
        }
        return started(try launchTimer(configuration, catalog: catalog, preset: preset?.name, scheduled: false))
    }

    func play(_ request: PlayRequest) throws(ProtocolError) -> Status {
        defer { reap() }
        let m: Meditation
        do { m = try store.find(request.id) } catch { throw ProtocolError(error) }
        var from = request.from ?? 0
        // A saved position before the trim start (the trim was edited since) starts at the trim.
        if request.resume, let last = m.lastPosition { from = max(0, last - (m.trimStart ?? 0)) }
        let device: DeviceName
        if let d = request.device {
            device = d
        } else {
            do { device = try DeviceName.setting(try Settings.load()) } catch { throw ProtocolError(error) }
        }
        return try startGuided(meditation: m, from: from, preparation: request.preparation ?? 0, device: device,
                               preview: request.preview)
    }

    // MARK: scheduled work (nothing that plays is ever interrupted)

    /// Whether nothing plays (a scheduled entry may start).
    var deviceFree: Bool {
        reap()
        return active == nil && starting == nil
    }

    /// A scheduled sit: a preset and/or options over the settings.
    func startScheduledTimer(preset ref: LibraryRef?, request: TimerRequest) throws(ProtocolError) -> Int {
        let catalog: SoundCatalog
        let configuration: TimerConfiguration
        var preset: Preset?
        do throws(CoreError) {
            catalog = try SoundCatalog.withCustomSounds(store: store)
            if let ref {
                guard let id = ref.id, let found = try PresetStore(store: store).find(id: id) else {
                    throw CoreError.badRequest(ScheduleProblem.presetGone(ref.name).words)
                }
                preset = found
            }
            configuration = try TimerConfiguration(settings: try Settings.load(), preset: preset, options: request, catalog: catalog)
        } catch {
            throw ProtocolError(error)
        }
        return try launchTimer(configuration, catalog: catalog, preset: preset?.name, scheduled: true)
    }

    /// A scheduled guided meditation.
    func startScheduledPlay(meditation ref: LibraryRef) throws(ProtocolError) -> Int {
        let m: Meditation
        let device: DeviceName
        do throws(CoreError) {
            guard let id = ref.id, let found = try store.all().first(where: { $0.id == id }) else {
                throw CoreError.badRequest(ScheduleProblem.meditationGone(ref.name).words)
            }
            m = found
            device = try DeviceName.setting(try Settings.load())
        } catch {
            throw ProtocolError(error)
        }
        return try launchGuided(meditation: m, from: 0, preparation: 0, device: device, preview: false, scheduled: true)
    }

    /// A bell only, when nothing plays; with `heardAt` (MonotonicClock ns), its first frame
    /// is heard at that instant (a ring in several rooms).
    func ringBell(sound id: String, strikes: Int, volume: Double) throws(ProtocolError) -> Int {
        try ringBell(sound: id, strikes: strikes, volume: volume, heardAt: nil)
    }

    func ringBell(sound id: String, strikes: Int, volume: Double, heardAt: UInt64?) throws(ProtocolError) -> Int {
        let catalog: SoundCatalog
        let sound: Sound
        let device: DeviceName
        do throws(CoreError) {
            catalog = try SoundCatalog.withCustomSounds(store: store)
            device = try DeviceName.setting(try Settings.load())
            sound = try catalog.gong(id)
        } catch {
            throw ProtocolError(error)
        }
        log.info("bell \(id) ×\(strikes) on \(device)")
        let output = standby.device(device)
        return try launch(.bell) { sid throws(CoreError) in
            let session = try BellSession(sound: sound, strikes: strikes, volume: volume, catalog: catalog,
                                          output: .device(output), heardAt: heardAt)
            return HostedSession(id: sid, player: .bell(session), runner: try SessionRunner(session))
        }
    }

    // MARK: starting sessions

    func launchTimer(_ configuration: TimerConfiguration, catalog: SoundCatalog, preset: String?,
                     scheduled: Bool, heardAt: UInt64? = nil, from: Int64 = 0) throws(ProtocolError) -> Int {
        let practice = self.practice, output = standby.device(configuration.device), hooks = self.hooks
        log.info("\(scheduled ? "scheduled " : "")timer on \(configuration.device)")
        return try launch(.timer) { id throws(CoreError) in
            let session = try TimerSession(configuration: configuration, catalog: catalog,
                                           output: .device(output), heardAt: heardAt, from: from)
            let runner = try SessionRunner(session, log: practice, preset: preset, scheduled: scheduled) { hooks.fire(.onEnd, $0) }
            hooks.fire(.onStart, runner.recordSoFar)
            return HostedSession(id: id, player: .timer(session), runner: runner)
        }
    }

    private func startGuided(meditation m: Meditation, from: Int64, preparation: Int64, device: DeviceName,
                             preview: Bool) throws(ProtocolError) -> Status {
        started(try launchGuided(meditation: m, from: from, preparation: preparation, device: device, preview: preview,
                                 scheduled: false))
    }

    private func launchGuided(meditation m: Meditation, from: Int64, preparation: Int64, device: DeviceName,
                              preview: Bool, scheduled: Bool) throws(ProtocolError) -> Int {
        let kind: SessionKind = preview ? .preview : .guided
        let catalog: SoundCatalog
        do { catalog = try SoundCatalog.withCustomSounds(store: store) } catch { throw ProtocolError(error) }
        let store = self.store, practice = self.practice, output = SessionOutput.device(standby.device(device)), hooks = self.hooks
        let trimStart = m.trimStart ?? 0, trimEnd = m.trimEnd ?? m.durationMilliseconds
        let window = min(10_000, trimEnd - trimStart)
        let previewFrom = (trimEnd - trimStart) / 2 - window / 2
        let id = try launch(kind, meditation: m, from: trimStart + (preview ? previewFrom : from)) { id throws(CoreError) in
            let session: GuidedSession
            if preview {
                session = try GuidedSession(meditation: m, store: store, catalog: catalog, output: output,
                                            from: previewFrom, window: window)
            } else {
                session = try GuidedSession(meditation: m, store: store, catalog: catalog, output: output,
                                            preparation: preparation, from: from)
            }
            let runner = try SessionRunner(session, log: practice, scheduled: scheduled) { hooks.fire(.onEnd, $0) }
            hooks.fire(.onStart, runner.recordSoFar)
            return HostedSession(id: id, player: .guided(session, device: device), runner: runner)
        }
        if !preview { suspended = nil }      // a new guided meditation replaces the one kept
        log.info("session \(id): \(scheduled ? "scheduled: " : "")\(preview ? "preview of" : "playing") \(m.name) (\(m.id)) on \(device)")
        return id
    }

    /// Takes the device for a new session made by `make` (which opens the device and
    /// starts it). The session playing (or starting) now ends first, as the one rule says
    /// (`SessionKind.admits(_:)`): a session of the same kind is replaced, another kind
    /// preempted (a guided meditation is kept to be resumed); a bell is refused while
    /// anything plays (`busy`). The session is opened on the device worker, after whatever
    /// it is doing (the fade of the one before), never on the caller's thread: a device that
    /// takes seconds to open delays nobody's answer. The answer says `starting`; a failure
    /// to open is an `ended` event with the device's code.
    private func launch(_ kind: SessionKind, meditation: Meditation? = nil, from: Int64 = 0,
                        _ make: @escaping @Sendable (Int) throws(CoreError) -> HostedSession) throws(ProtocolError) -> Int {
        reap()               // a session that just ended is over, not replaced or preempted
        let current = [active?.kind, starting.flatMap { $0.cancelled == nil ? $0.kind : nil }].compactMap { $0 }
        if let playing = current.first(where: { $0.admits(kind) == .refuse }) {
            throw ProtocolError(.busy, both("a \(playing.rawValue) is playing; a \(kind.rawValue) never interrupts it",
                                          "es spielt: \(playing.rawValue); \(kind.rawValue) unterbricht das nie"))
        }
        let id = nextID
        nextID += 1
        if let s = starting, s.cancelled == nil {
            // Never begun: a guided meditation not yet playing is not kept.
            starting?.cancelled = s.kind.admits(kind).endReason(for: kind)
        }
        if let s = active { retire(s, for: kind) }
        starting = Starting(id: id, kind: kind, meditation: meditation.map { .init(id: $0.id, name: $0.name, teacher: $0.teacher) },
                            position: meditation.map { _ in from }, duration: meditation?.durationMilliseconds,
                            range: meditation.map { m in (m.trimStart ?? 0)...max(m.trimStart ?? 0, m.trimEnd ?? m.durationMilliseconds) })
        slot.want(id)
        let slot = self.slot
        worker.run("start") { () -> DeviceWorker.Completion in
            guard slot.isWanted(id) else { return .superseded(id: id, kind: kind) }
            // One opened for a start since replaced, not yet taken in: closed first.
            if let before = slot.takeUnadopted() {
                before.markEnding(.replaced)
                if !before.engineDone { before.session.stop(fade: 0.05) }
                _ = before.runner.finish()
            }
            do throws(CoreError) {
                let hosted = try make(id)
                slot.opened(hosted)
                return .started(hosted)
            } catch {
                // In both languages: each client reads it in its own.
                return .failedToStart(id: id, kind: kind, message: error.words, device: error.category == .device)
            }
        }
        return id
    }

    /// The session playing ends for a new one of kind `incoming` (which it admits: the
    /// caller has refused what it does not): it fades out and is closed on the worker; its
    /// `ended` event goes out now.
    private func retire(_ s: HostedSession, for incoming: SessionKind) {
        let rule = s.kind.admits(incoming)
        let reason = rule.endReason(for: incoming) ?? .replaced     // (never nil: launch refused those)
        s.markEnding(reason)
        var position: Int64?
        if case .guided(let g, let device) = s.player {
            let at = s.seekTarget.withLock { $0 } ?? g.filePosition
            position = at
            // Kept, to be resumed where it was, while its voice has something left.
            if rule == .suspend, g.position < g.voiceEnd {
                suspended = (g.meditation, at, device)
            }
        }
        active = nil
        announceEnd(s, reason: reason, position: position)
        close(s, fade: reason == .replaced ? 0.3 : 0.5)
    }

    /// Fades out (if it still sounds) and closes on the worker: the device is free after it.
    private func close(_ s: HostedSession, fade: Double) {
        worker.run("close") {
            if !s.engineDone { s.session.stop(fade: fade) }
            let record = s.runner.finish()
            return .closed(s, SessionRecordSummary(reason: record.endReason))
        }
    }

    /// The answer to a start: the status, always with the new session's id (on a device
    /// that never blocks, the session may be over already).
    func started(_ id: Int) -> Status {
        var s = status()
        if s.session == nil { s.session = id }
        return s
    }

    private func begin(_ session: HostedSession) {
        active = session
        lastProgress = MonotonicClock.milliseconds()
        // Its end (or a failure) wakes the loop, which need not look every second.
        session.engine.whenSettled { [worker] in worker.poke() }
        reap()
    }

    /// How long the loop may sleep while a session plays and nobody follows its states
    /// (ms; nil: nothing plays): until the cadence that keeps what was heard. Its end and a
    /// failure wake the loop (`whenSettled`), commands come through the sockets.
    var sessionSleep: Int32? {
        guard let s = active else { return nil }
        return Int32(clamping: s.runner.keepUpDueIn())
    }

    private func playing() throws(ProtocolError) -> HostedSession {
        if let s = active { return s }
        if starting != nil { throw Self.stillStarting }
        throw ProtocolError(.noSession, both("nothing is playing", "nichts spielt"))
    }

    private static var stillStarting: ProtocolError {
        ProtocolError(.busy, both("the session is starting (the one before fades out); try again in a moment",
                                "die Sitzung startet gerade (die vorige klingt aus); versuche es gleich noch einmal"))
    }

    // MARK: the heartbeat

    /// Takes in the worker's results, ends a session whose engine is done, notes state
    /// changes as events.
    func reap() {
        for completion in worker.take() {
            switch completion {
            case .started(let h):
                slot.adopt(h)
                scheduler.sessionOpened(h.id)
                if let s = starting, s.id == h.id, s.cancelled == nil {
                    starting = nil
                    if s.paused, !h.paused.exchange(true, ordering: .acquiringAndReleasing) {
                        h.command(on: worker, "pause") { h.session.pause() }
                    }
                    if let target = s.seekTarget, let g = h.guided {
                        h.seekTarget.withLock { $0 = target }
                        h.command(on: worker, "seek") {
                            g.seek(toFile: target)
                            h.seekTarget.withLock { if $0 == target { $0 = nil } }
                        }
                    }
                    begin(h)
                } else {
                    // Stopped or replaced while it was opening.
                    let reason = starting.flatMap { $0.id == h.id ? $0.cancelled : nil } ?? .replaced
                    if starting?.id == h.id { starting = nil }
                    h.markEnding(reason)
                    announceEnd(h, reason: reason, position: nil)
                    close(h, fade: 0.05)
                }
            case .failedToStart(let id, let kind, let message, let device):
                if starting?.id == id { starting = nil }
                let ended = Ended(session: id, source: kind, reason: .failed, message: message, code: device ? .device : .failed)
                lastEnded = ended
                events.append(.ended(ended))
                log.error("session \(id) failed to start: \(message.en)")
                scheduler.sessionFailed(id, message.en)
            case .superseded(let id, let kind):
                // Never opened: a later start took its place, or it was stopped.
                let reason: EndReason = starting.flatMap { $0.id == id ? $0.cancelled : nil } ?? .replaced
                if starting?.id == id { starting = nil }
                scheduler.sessionOpened(id)
                let ended = Ended(session: id, source: kind, reason: reason.wireName)
                lastEnded = ended
                events.append(.ended(ended))
                log.info("session \(id) \(reason.name) before it started")
            case .closed(let h, let summary):
                log.info("session \(h.id) closed (\(summary.reason.name))")
                if let skipped = h.engine.caughtUpStart {
                    log.info("session \(h.id): its last instant in step with other rooms was reached \(LogFigures.milliseconds(skipped)) ms late: that much of its first audio was left out, and it was on time")
                }
                if let late = h.engine.missedStart {
                    log.warning("session \(h.id): its instant was missed by \(Int((late * 1000).rounded())) ms (the device was not ready in time): nothing was heard")
                }
            case .done:
                break
            }
        }
        if let s = active {
            if s.isOver {
                var reason = s.runner.expectedReason
                if s.engine.state == .failed, reason.wireName != .failed { reason = .failed(tr("the sound device failed", "das Audiogerät ist ausgefallen")) }
                s.markEnding(reason)
                active = nil
                announceEnd(s, reason: reason, position: s.guided?.filePosition)
                close(s, fade: 0)
            } else {
                savePositionPeriodically(s)
            }
        }
        let key = stateKey()
        if key != lastStateKey {
            lastStateKey = key
            events.append(.state(status()))
        }
    }

    private func announceEnd(_ s: HostedSession, reason: EndReason, position: Int64?) {
        var ended = Ended(session: s.id, source: s.kind, reason: reason.wireName, position: position)
        if case .preempted(let by) = reason { ended.by = by }
        if case .failed(let message) = reason { ended.message = .same(message) }
        lastEnded = ended
        if s.kind.isPractice { lastSitEnded = Scheduler.wallClock() }
        events.append(.ended(ended))
        if case .failed(let message) = reason {
            log.error("session \(s.id) failed: \(message)")
        } else {
            log.info("session \(s.id) \(reason.name)")
        }
    }

    /// The runner's cadence (what was heard, a guided meditation's place, every 5 s),
    /// its writing on the worker: the loop never waits on the disk.
    private func savePositionPeriodically(_ s: HostedSession) {
        let runner = s.runner
        guard runner.keepUpDue() else { return }
        worker.run("keep up") { runner.keepUp(); return nil }
    }

    /// Ends the session playing now (SIGTERM): a 1-s fade, the position saved, the device
    /// released; waits for the worker (the process is about to exit).
    func shutdown() {
        standby.holder.keepsOpen = false
        if let s = active {
            s.markEnding(.stopped)
            active = nil
            announceEnd(s, reason: .stopped, position: s.guided?.filePosition)
            close(s, fade: 1.0)
        }
        starting?.cancelled = .stopped
        worker.drain()
        reap()
        worker.drain()
        standby.shutdown()
    }

    private func stateKey() -> String {
        if let s = starting, active == nil { return "\(s.id)|starting|\(s.paused)" }
        guard let s = active else { return "idle|\(suspended?.meditation.id ?? "")" }
        return "\(s.id)|\(s.session.snapshot.phase.rawValue)|\(s.paused.load(ordering: .acquiring))"
    }

    // MARK: status

    /// What is playing: the answer to every command and the payload of events.
    func status() -> Status {
        var o = Status(state: .idle)
        o.mqtt = mqttLink
        if let room = roomsLink?.room {     // a node in a room: its room and its clock
            o.room = room.text
            o.clock = ClockState.read()
        }
        if let p = suspended {
            o.suspended = .init(id: p.meditation.id, name: p.meditation.name, position: p.position)
        }
        o.lastEnded = lastEnded
        o.nextScheduled = scheduler.nextStatus
        if active == nil, starting == nil, let held = standby.holder.heldDevice, !held.failed {
            o.keptOpen = .init(device: held.name, framesWritten: held.framesWritten)
        }
        guard let s = active else {
            if let st = starting {
                o.state = .starting
                o.session = st.id
                o.source = st.kind
                o.meditation = st.meditation
                o.position = st.seekTarget ?? st.position
                o.duration = st.duration
                if st.seekTarget != nil { o.seeking = true }
                o.paused = st.paused
            }
            return o
        }
        let engine = s.engine
        o.session = s.id
        o.source = s.kind
        o.paused = s.paused.load(ordering: .acquiring)
        if let stats = engine.statistics {
            o.underruns = Int(stats.xruns + stats.silenceEvents)
            o.xruns = Int(stats.xruns)
            o.silences = Int(stats.silenceEvents)
            o.realtime = stats.realtime == true
            o.device = engine.deviceInfo?.name ?? ""
            o.lastPause = stats.lastPause
        }
        // What the session says of itself; the status adds who it is and where a seek goes.
        let snap = s.session.snapshot
        o.state = Phase(rawValue: snap.phase.rawValue) ?? .running
        o.elapsed = snap.elapsed
        o.remaining = snap.remaining
        o.duration = snap.duration
        if snap.open { o.open = true }
        o.section = snap.section.map { .init(index: $0.index, kind: $0.kind, remaining: $0.remaining, count: $0.count) }
        o.nextGong = snap.nextGong
        o.startsIn = snap.startsIn
        o.position = snap.position
        o.sound = snap.sound
        if let m = s.guided?.meditation {
            o.meditation = .init(id: m.id, name: m.name, teacher: m.teacher)
            if let target = s.seekTarget.withLock({ $0 }) {
                o.position = target
                o.seeking = true
            }
        }
        return o
    }
}
