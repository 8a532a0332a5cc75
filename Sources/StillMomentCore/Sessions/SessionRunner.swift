/// The one place a session starts and ends, whoever started it (a shell in the
/// foreground, the daemon, later a schedule or the web app) and wherever it plays (a
/// device or a file). What must happen at the end (the position saved, a practice-log
/// entry) happens here, once, through `onEnd`.
import FoundationEssentials
import Glibc
import StillMomentAudio
import Synchronization

/// What a session was, when it has ended: what the practice log keeps.
public struct SessionRecord: Codable, Sendable, Equatable {
    public var id: String
    public var kind: SessionKind
    /// What was asked (a timer's length, a meditation's name).
    public var summary: String
    public var meditationID: String?
    public var teacher: String?
    public var preset: String?
    /// When it started (wall clock) and the offset from UTC there, in seconds.
    public var start: Date
    public var utcOffset: Int
    public var plannedMilliseconds: Int64
    public var heardMilliseconds: Int64
    public var endReason: EndReason
    /// Rendered to a file: not practice (nothing was heard).
    public var rendered: Bool
    public var scheduled: Bool

    /// The practice-log entry of this record.
    public var entry: PracticeEntry {
        PracticeEntry(id: id, kind: kind, name: preset ?? summary, meditationID: meditationID, teacher: teacher,
                      preset: preset, start: LocalTime(unix: Int64(start.timeIntervalSince1970), utcOffset: utcOffset),
                      plannedMilliseconds: plannedMilliseconds, heardMilliseconds: heardMilliseconds,
                      endReason: endReason.name, scheduled: scheduled)
    }
}

public final class SessionRunner: Sendable {
    public let session: any Session
    public let rendered: Bool
    public let id: String
    private let startedAt: Date
    private let preset: String?
    private let scheduled: Bool
    /// Where heard sessions are logged: none for renders and previews.
    private let log: PracticeLog?
    private let state = Mutex<(ending: EndReason?, record: SessionRecord?)>((nil, nil))
    private let onEnd: @Sendable (SessionRecord) -> Void

    /// Starts `session`; `onEnd` runs once, on the thread that ends it. With `log`, a
    /// session that is heard (not a render, not a preview) is in the practice log from
    /// its start (an open entry) to its end.
    public init(_ session: any Session, rendered: Bool = false, log: PracticeLog? = nil, preset: String? = nil,
                scheduled: Bool = false, onEnd: @escaping @Sendable (SessionRecord) -> Void = { _ in }) throws(CoreError) {
        self.session = session
        self.rendered = rendered
        self.onEnd = onEnd
        self.preset = preset
        self.scheduled = scheduled
        self.log = rendered || !session.kind.isPractice ? nil : log
        id = UUID().uuidString.lowercased()
        startedAt = Date()
        try session.start()
        if let log = self.log {
            // The log never stops a sit: a full disk is the log's loss, said in the daemon's log.
            try? log.open(record(reason: .stopped).entry)
        }
    }

    /// Notes what was heard so far in the open log entry.
    public func checkpoint() {
        guard let log, state.withLock({ $0.record == nil }) else { return }
        try? log.update(id: id, heardMilliseconds: session.heardMilliseconds)
    }

    // MARK: the cadence every driver keeps (the daemon, --foreground)

    /// How often what was heard goes into the log and a guided meditation's place is kept:
    /// a crash or a kill loses at most this much.
    public static let keepEvery: Int64 = 5_000
    /// When the cadence first runs, after the start (ms): before the daemon releases the
    /// code its session's start touched (3 s in), so that what the cadence runs only the
    /// first time (the statements' preparation, the types' metadata) is released with it.
    public static let firstKeep: Int64 = 2_000
    /// When the cadence last ran (MonotonicClock ms) and the position it kept.
    private let kept = Mutex<(at: Int64, position: Int64?)>((MonotonicClock.milliseconds() - keepEvery + firstKeep, nil))

    /// Whether it is time to keep up (claims the turn: asked again at once, it says no).
    /// Cheap, for a loop that must not wait on the disk; `keepUp` then does the writing.
    public func keepUpDue(now: Int64 = MonotonicClock.milliseconds()) -> Bool {
        kept.withLock { k in
            guard now - k.at >= Self.keepEvery else { return false }
            k.at = now
            return true
        }
    }

    /// How long until the cadence is due (ms, 0: now), for a loop that sleeps meanwhile.
    public func keepUpDueIn(now: Int64 = MonotonicClock.milliseconds()) -> Int64 {
        kept.withLock { k in max(0, k.at + Self.keepEvery - now) }
    }

    /// Notes what was heard and keeps the place when it moved (never for a render: it
    /// keeps the one saved). May wait on the disk.
    public func keepUp() {
        checkpoint()
        guard !rendered, state.withLock({ $0.record == nil }), let position = session.keptPosition else { return }
        let moved = kept.withLock { k -> Bool in
            defer { k.position = position }
            return k.position != position
        }
        if moved { try? session.keepPosition() }
    }

    /// Both, for a driver on a thread that may wait: what a loop calls on each turn.
    public func keepUpIfDue() {
        if keepUpDue() { keepUp() }
    }

    /// The record as it stands (what was asked, what was heard so far): what a session's
    /// start tells the daemon's hooks.
    public var recordSoFar: SessionRecord { state.withLock { $0.record } ?? record(reason: .stopped) }

    private func record(reason: EndReason) -> SessionRecord {
        SessionRecord(id: id, kind: session.kind, summary: session.summary, meditationID: session.meditationID,
                      teacher: session.teacher, preset: preset, start: startedAt, utcOffset: Self.utcOffset(at: startedAt),
                      plannedMilliseconds: session.plannedMilliseconds, heardMilliseconds: session.heardMilliseconds,
                      endReason: reason, rendered: rendered, scheduled: scheduled)
    }

    /// Records why the session is ending, before it is over (the first reason wins:
    /// a stop that a preemption follows is a stop).
    public func markEnding(_ reason: EndReason) {
        state.withLock { if $0.ending == nil { $0.ending = reason } }
    }

    public var endingReason: EndReason? { state.withLock { $0.ending } }

    /// Fades out and ends, without waiting for the fade.
    public func stop(fade seconds: Double, reason: EndReason = .stopped) {
        markEnding(reason)
        session.fadeOut(seconds: seconds)
    }

    public var isOver: Bool { session.isOver }

    /// The reason `finish` will record, known before the session is closed (a failure,
    /// the reason marked, or whether it played to its end).
    public var expectedReason: EndReason {
        if let first = session.errors.first { return .failed(first.description) }
        return state.withLock { $0.ending } ?? (session.playedToEnd ? .completed : .stopped)
    }

    /// Ends the session (it must be over, or is closed as it is): the device is
    /// released, the record made and `onEnd` called. Called again, it returns the same
    /// record and does nothing else.
    @discardableResult
    public func finish() -> SessionRecord {
        if let done = state.withLock({ $0.record }) { return done }
        let errors = session.errors
        var reason = state.withLock { $0.ending } ?? (session.playedToEnd ? .completed : .stopped)
        if let first = errors.first { reason = .failed(first.description) }
        session.close()
        let record = record(reason: reason)
        let first = state.withLock { s -> Bool in
            if s.record != nil { return false }
            s.record = record
            return true
        }
        guard first else { return state.withLock { $0.record } ?? record }
        if let log { try? log.close(id: id, heardMilliseconds: record.heardMilliseconds, reason: reason.name) }
        session.ended(record)
        onEnd(record)
        return record
    }

    /// The local time zone's offset from UTC at `date`, in seconds.
    static func utcOffset(at date: Date) -> Int {
        var t = time_t(date.timeIntervalSince1970)
        var local = tm()
        guard localtime_r(&t, &local) != nil else { return 0 }
        return Int(local.tm_gmtoff)
    }
}
