/// The daemon keeps time: one wake-up, computed from the schedule (on every change, on a
/// clock jump and past each occurrence), at which due entries run through the session
/// service. Policy: nothing that plays is interrupted. A bell rings only when nothing plays,
/// else it is skipped and recorded; a sit or a guided meditation waits up to 10 minutes
/// for the device, then is recorded as missed. Occurrences passed more than 5 minutes ago
/// (the clock jumped forward) are recorded as missed, never run late in a burst; a clock
/// that goes back runs nothing twice (each entry remembers the last occurrence handled).
import FoundationEssentials
import Glibc
import Logging
import StillMomentAudio
import StillMomentCore

/// What the schedule needs of whoever plays: whether the device is free, when the last sit
/// ended, and the three things an entry starts. The session service is one; the scheduler
/// knows nothing else of it.
protocol ScheduleHost: AnyObject {
    var deviceFree: Bool { get }
    var lastSitEnded: Double? { get }
    /// Each returns the id of the session it started (opened on the device worker).
    func ringBell(sound id: String, strikes: Int, volume: Double) throws(ProtocolError) -> Int
    /// A bell whose first frame is heard at `heardAt` (MonotonicClock ns): a bell for rooms.
    func ringBell(sound id: String, strikes: Int, volume: Double, heardAt: UInt64?) throws(ProtocolError) -> Int
    func startScheduledTimer(preset ref: LibraryRef?, request: TimerRequest) throws(ProtocolError) -> Int
    func startScheduledPlay(meditation ref: LibraryRef) throws(ProtocolError) -> Int
}

final class Scheduler {
    /// How long a scheduled sit waits for the device (10 min; the tests shorten it with
    /// STILLMOMENT_SCHEDULE_WAIT, in seconds).
    static let maxWait: Double = {
        if let raw = getenv("STILLMOMENT_SCHEDULE_WAIT"), let v = Double(String(cString: raw)), v.isFinite, v >= 0, v <= 600 { return v }
        return 600
    }()
    static let quietAfterSit: Double = 120

    private let schedules: ScheduleStore
    private let log: Logger
    private var zone = ZoneRules.system()
    /// When to look again (unix seconds), nil when nothing is scheduled.
    private(set) var wake: Double?
    private var dirty = true
    /// Sits waiting for the device: the entry and since when.
    private var waiting: [(entry: ScheduleEntry, at: Int64, since: Double)] = []
    /// Wall clock minus monotonic clock at the last look: a change is a clock jump.
    private var clockBase: Double = 0
    private(set) var entryCount = 0
    /// The schedule's main switch is off (as last looked at).
    private(set) var isOff = false
    private(set) var next: (entry: ScheduleEntry, at: Int64)?

    init(store: LibraryStore, log: Logger) {
        schedules = ScheduleStore(store: store)
        self.log = log
        clockBase = Self.wallClock() - Self.monotonic()
    }

    /// The timetable's change counter when last read, and when that was (monotonic s).
    private var version: Int64?
    private var versionReadAt = -Double.infinity

    /// The schedule changed (a client said so): look again now.
    func reschedule() { dirty = true }

    /// Whoever changed the timetable (a CLI of an older version, the web app, an import
    /// that failed half-way, sqlite3 by hand), the counter its triggers keep says so:
    /// read at most every 2 s, on the wake-ups the daemon has anyway (5 s when idle).
    private func noticeChanges() {
        let now = Self.monotonic()
        guard now - versionReadAt >= 2 else { return }
        versionReadAt = now
        guard let v = try? schedules.version() else { return }
        if let version, v != version {
            log.info("the schedule changed: looking at it again")
            dirty = true
        }
        version = v
    }

    var hasEntries: Bool { entryCount > 0 }

    static func wallClock() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    static func monotonic() -> Double { MonotonicClock.seconds() }

    /// Milliseconds until the next wake-up, at most `cap`.
    func timeout(cap: Int32) -> Int32 {
        if dirty || !waiting.isEmpty { return min(cap, waiting.isEmpty ? 0 : 1000) }
        guard let wake else { return cap }
        let ms = (wake - Self.wallClock()) * 1000
        return Int32(max(0, min(Double(cap), ms.rounded(.up))))
    }

    /// Runs what is due. Called from the daemon's loop after every wake-up.
    func tick(_ host: some ScheduleHost) {
        let wall = Self.wallClock()
        let base = wall - Self.monotonic()
        if abs(base - clockBase) > 2 {
            log.notice("the clock jumped by \(Int(base - clockBase)) s: looking at the schedule again")
            dirty = true
            zone = ZoneRules.system()
        }
        clockBase = base
        noticeChanges()
        retryWaiting(host, now: wall)
        guard dirty || (wake.map { wall >= $0 } ?? false) else { return }
        dirty = false
        decide(host, now: wall)
    }

    private func decide(_ host: some ScheduleHost, now: Double) {
        let entries: [ScheduleEntry]
        let quiet: Set<CivilDate>
        do {
            // Switched off: nothing is due, nothing is next (on again, from that moment).
            isOff = try schedules.offSince() != nil
            // Entries for other sync devices only are listed here, never run here.
            entries = isOff ? [] : try schedules.all().filter { !$0.elsewhere }
            quiet = try schedules.quietDays()
        } catch {
            log.error("cannot read the schedule: \(error.description)")
            wake = now + 60
            return
        }
        entryCount = entries.count
        let seeds = Dictionary(uniqueKeysWithValues: entries.map { ($0.id, $0.seed) })
        // A bell for rooms is looked at a little ahead of its second (RoomSettings'
        // lead), so that it can be started for that very instant on every node.
        let lead = Double(RoomSettings.leadMilliseconds) / 1000
        var outcome = ScheduleDecision.Outcome()
        for (group, ahead) in [(entries.filter { $0.rooms == nil }, 0.0), (entries.filter { $0.rooms != nil }, lead)] where !group.isEmpty {
            let o = ScheduleDecision.decide(
                group.map { ScheduleDecision.Entry(id: $0.id, when: $0.when, enabled: $0.enabled, lastHandled: $0.lastHandled) },
                now: Int64((now + ahead).rounded(.down)), zone: zone, quiet: quiet) { seeds[$0] ?? 0 }
            outcome.run += o.run
            outcome.missed += o.missed
            if let w = o.wake.map({ Double($0) - ahead }) { outcome.wakeAt = min(outcome.wakeAt ?? w, w) }
        }
        outcome.run.sort { $0.at < $1.at }
        for m in outcome.missed {
            record(m.id, at: m.at, .missed, "the clock was late (a boot without a clock?) or the daemon was not running")
        }
        for r in outcome.run {
            guard let entry = entries.first(where: { $0.id == r.id }) else { continue }
            run(entry, at: r.at, host: host, now: now)
        }
        wake = outcome.wakeAt
        outcome.wake = outcome.wakeAt.map { Int64(($0 + lead).rounded(.down)) }
        next = nil
        if let w = outcome.wake {
            for e in entries where e.enabled {
                if let t = e.when.next(after: Int64(now.rounded(.down)), zone: zone, seed: e.seed, quiet: quiet), t == w {
                    next = (e, t)
                    break
                }
            }
        }
    }

    /// Runs one occurrence (or the entry now, for `ring-now`).
    func run(_ entry: ScheduleEntry, at: Int64, host: some ScheduleHost, now: Double, manual: Bool = false) {
        if !manual { handled(entry.id, at) }
        if let problem = entry.problem {
            record(entry.id, at: at, .failed, problem.text(.en))
            return
        }
        switch entry.action {
        case .bell(let sound, let strikes, let volume):
            var heardAt: UInt64?
            if let rooms = entry.rooms {
                // A bell for rooms: only in this node's room, only with a clock fit to
                // ring with the others, and started for its very second.
                let settings = try? RoomSettings(Settings.load())
                guard let room = settings?.room, rooms.includes(room) else {
                    record(entry.id, at: at, .skipped, "for rooms \(rooms), and this node is in \(settings?.room.map { "room \($0)" } ?? "no room")")
                    return
                }
                let clock = ClockState.read()
                guard let settings, clock.fit(boundMilliseconds: settings.clockBoundMilliseconds) else {
                    record(entry.id, at: at, .skipped, clock.synchronised ? "this node's clock is off by up to \(clock.estimatedErrorMicroseconds / 1000) ms: left out"
                                                                         : "this node's clock is not synchronised: left out")
                    return
                }
                heardAt = settings.monotonicInstant(realtimeMilliseconds: at * 1000)
            }
            guard host.deviceFree else {
                record(entry.id, at: at, .skipped, "something was playing")
                return
            }
            // A bell never falls within 2 minutes of the end of a sit.
            if let ended = host.lastSitEnded, now - ended < Self.quietAfterSit, !manual {
                record(entry.id, at: at, .skipped, "a sit ended less than 2 minutes before")
                return
            }
            do {
                if let heardAt, !manual {
                    opening[try host.ringBell(sound: sound, strikes: strikes, volume: volume, heardAt: heardAt)] = (entry.id, at)
                    record(entry.id, at: at, .ran, "for rooms \(entry.rooms?.description ?? ""): started for its instant")
                } else {
                    opening[try host.ringBell(sound: sound, strikes: strikes, volume: volume)] = (entry.id, at)
                    record(entry.id, at: at, .ran, manual ? "rung now" : Self.lateness(at))
                }
            } catch {
                record(entry.id, at: at, .failed, error.message)
            }
        case .timer, .play:
            if host.deviceFree {
                start(entry, at: at, host: host, manual: manual)
            } else {
                log.info("schedule \(entry.id): something plays; waiting up to 10 minutes")
                waiting.append((entry, at, now))
            }
        }
    }

    private func start(_ entry: ScheduleEntry, at: Int64, host: some ScheduleHost, manual: Bool) {
        do {
            switch entry.action {
            case .timer(let preset, let request): opening[try host.startScheduledTimer(preset: preset, request: request)] = (entry.id, at)
            case .play(let meditation): opening[try host.startScheduledPlay(meditation: meditation)] = (entry.id, at)
            case .bell: return
            }
            record(entry.id, at: at, .ran, manual ? "rung now" : Self.lateness(at))
        } catch {
            record(entry.id, at: at, .failed, error.message)
        }
    }

    private func retryWaiting(_ host: some ScheduleHost, now: Double) {
        guard !waiting.isEmpty else { return }
        var still: [(entry: ScheduleEntry, at: Int64, since: Double)] = []
        for w in waiting {
            if host.deviceFree {
                start(w.entry, at: w.at, host: host, manual: false)
            } else if now - w.since > Self.maxWait {
                record(w.entry.id, at: w.at, .missed, "something played for \(TimeText.compact(Int64(Self.maxWait * 1000))) after its time")
            } else {
                still.append(w)
            }
        }
        waiting = still
    }

    /// How long after its time an entry started (the daemon aims at 0; see the README).
    static func lateness(_ at: Int64) -> String {
        "started \(Int(((wallClock() - Double(at)) * 1000).rounded())) ms after its time"
    }

    private func handled(_ id: Int64, _ at: Int64) {
        do { try schedules.handled(id, at: at) } catch { log.error("cannot update the schedule: \(error.description)") }
    }

    /// Sessions this schedule started that have not opened the device yet: their entry
    /// and occurrence, so that a failure to open is recorded against the entry.
    private var opening: [Int: (entry: Int64, at: Int64)] = [:]

    /// The service's word on a session it opened on the device worker.
    func sessionOpened(_ id: Int) { opening[id] = nil }
    func sessionFailed(_ id: Int, _ message: String) {
        guard let o = opening.removeValue(forKey: id) else { return }
        record(o.entry, at: o.at, .failed, message)
    }

    /// The outcome last recorded (for ring-now, which says what became of the entry).
    private(set) var lastRecorded: (entry: Int64, outcome: ScheduleOutcome, detail: String?)?

    private func record(_ id: Int64, at: Int64, _ outcome: ScheduleOutcome, _ detail: String?) {
        lastRecorded = (id, outcome, detail)
        if outcome == .missed { handled(id, at) }
        log.info("schedule \(id) at \(LocalTime(unix: at, utcOffset: zone.offset(at: at)).iso8601): \(outcome.rawValue)\(detail.map { " (\($0))" } ?? "")")
        do { try schedules.record(ScheduleEvent(entry: id, at: at, outcome: outcome, detail: detail)) } catch {
            log.error("cannot record the schedule's event: \(error.description)")
        }
    }

    /// The next item, for `status`.
    var nextStatus: Status.NextScheduled? {
        guard let next else { return nil }
        return Status.NextScheduled(id: next.entry.id, at: zone.localTime(next.at).iso8601, when: next.entry.when.description,
                                    action: next.entry.action.description, name: next.entry.name)
    }
}
