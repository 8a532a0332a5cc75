/// One session on the engine, whatever plays it: a timer or a guided meditation (or its
/// preview). The runner (SessionRunner.swift) starts and ends every session through this.
import FoundationEssentials
import StillMomentAudio

/// Why a session ended.
public enum EndReason: Sendable, Equatable, Codable {
    /// It played to its end.
    case completed
    /// Ended early on purpose, as a completed sit (the end gong rang): `finish`.
    case finished
    /// Stopped by its listener (a fade-out).
    case stopped
    /// A new session of the same kind took its place.
    case replaced
    /// Another kind of session took the device (a timer over a guided meditation, …;
    /// `SessionKind.admits(_:)`).
    case preempted(by: SessionKind)
    /// The device or a file failed.
    case failed(String)

    /// The stable name in the protocol, the log and the practice log.
    public var name: String {
        switch self {
        case .completed: return "completed"
        case .finished: return "finished"
        case .stopped: return "stopped"
        case .replaced: return "replaced"
        case .preempted: return "preempted"
        case .failed: return "failed"
        }
    }
}

public protocol Session: AnyObject, Sendable {
    var kind: SessionKind { get }
    /// What was asked, in a line (the timer's length, the meditation's name).
    var summary: String { get }
    /// Opens the output's stream and starts playing.
    func start() throws(CoreError)
    func pause()
    func resume()
    var isPaused: Bool { get }
    /// Moves by `ms` where it applies (a guided meditation); false where it does not.
    @discardableResult func seek(by ms: Int64) -> Bool
    /// Fades out over `seconds` from what is heard now and ends; returns at once (the
    /// session is over when `isOver` says so).
    func fadeOut(seconds: Double)
    /// The engine has finished, stopped or failed.
    var isOver: Bool { get }
    /// Whether it played to its planned end.
    var playedToEnd: Bool { get }
    /// What went wrong while it played.
    var errors: [AudioError] { get }
    /// The length planned, and what was heard of it so far: audio played after the
    /// preparation, pauses excluded (ms).
    var plannedMilliseconds: Int64 { get }
    var heardMilliseconds: Int64 { get }
    /// Called once by the runner when the session has ended (a guided meditation that
    /// was heard saves its position here; a render keeps the saved one).
    func ended(_ record: SessionRecord)
    /// Waits on the caller's thread until the session is over, at most `seconds`.
    func waitUntilOver(timeout seconds: Double)
    /// Releases the output (the device is free afterwards).
    func close()
    /// The meditation and its teacher, for a guided meditation.
    var meditationID: String? { get }
    var teacher: String? { get }
    /// Where it is in what it plays, when that is worth keeping (a guided meditation's
    /// position in its file, ms); nil for the others.
    var keptPosition: Int64? { get }
    /// Keeps `keptPosition` (a guided meditation saves it in the catalog).
    func keepPosition() throws(CoreError)
    /// What it is doing now, for every reader (status, events, the live view).
    var snapshot: SessionSnapshot { get }
}

extension Session {
    public var meditationID: String? { nil }
    public var teacher: String? { nil }
    public var keptPosition: Int64? { nil }
    public func keepPosition() throws(CoreError) {}

    /// Fades out, waits until the fade is over and releases the output.
    public func stop(fade seconds: Double) {
        fadeOut(seconds: seconds)
        waitUntilOver(timeout: seconds + 5)
        close()
    }
}
