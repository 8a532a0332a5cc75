// The daemon's `output-standby` policy: whether the sound device stays open between
// sessions (StillMomentAudio's Standby holds it, playing silence). close: never;
// keep-open: always while the daemon runs; keep-open-during-schedule (the default): from
// a minute before a scheduled session or bell until it has ended. The setting and the
// device are read again when the settings file changes, so `stillmoment settings set`
// takes effect without a restart. Opening and closing happen on the device worker, never in the loop.
import Glibc
import Logging
import StillMomentAudio
import StillMomentCore
import Synchronization

final class StandbyKeeper {
    /// How long before a scheduled entry the device is opened.
    static let lead: Double = 60
    private let log: Logger
    private var mode: OutputStandby = .keepOpenDuringSchedule
    private var device = DeviceName.default
    /// The settings file's inode, size and change time when it was last read.
    private var settingsStamp: [Int]? = nil
    /// After a failed open: not again before this (monotonic seconds).
    private var retryAt = 0.0
    private var lastFailure: String?
    private let failure = FailureBox()
    /// The device held open between sessions; the sessions' engines get it with their device.
    let holder = Standby()

    init(log: Logger) { self.log = log }

    /// One look, from the service's tick: `nextAt` is the next scheduled entry (unix
    /// seconds) and `nextDevice` the device it names (nil: the `device` setting), `idle`
    /// whether nothing plays, starts or closes.
    func update(nextAt: Int64?, nextDevice: DeviceName?, idle: Bool, worker: DeviceWorker) {
        let now = Scheduler.monotonic()
        // Read again when the file changed (a stat: the idle daemon touches no more code).
        var st = stat()
        let stamp = stat(Paths.settingsFile, &st) == 0
            ? [Int(st.st_ino), Int(st.st_size), st.st_mtim.tv_sec, st.st_mtim.tv_nsec] : []
        if stamp != settingsStamp {
            settingsStamp = stamp
            if let settings = try? Settings.load() {
                let m = settings.outputStandby
                if m != mode { log.info("output-standby: \(m.rawValue)") }
                mode = m
                // A damaged name is left as it was (the session on it says why).
                if let d = try? DeviceName.setting(settings) { device = d }
            }
        }
        let want: Bool
        var target = device
        switch mode {
        case .close: want = false
        case .keepOpen: want = true
        case .keepOpenDuringSchedule:
            want = nextAt.map { Double($0) - Scheduler.wallClock() <= Self.lead } ?? false
            target = nextDevice ?? device
        }
        // A session that ends now keeps its device open (or closes it) as this says.
        holder.keepsOpen = want
        guard idle else { return }
        if case .some(let outcome) = failure.take() {
            if let failed = outcome, failed != lastFailure {
                log.warning("cannot keep the device open between sessions: \(failed)")
            } else if outcome == nil {
                log.info("output-standby: \(target) is kept open between sessions")
                retryAt = 0      // opened: a later need (another device used meanwhile) opens at once
            }
            lastFailure = outcome
        }
        let held = holder.heldDevice
        if want, held == nil || held?.name != target.text || held?.failed == true, now >= retryAt {
            retryAt = now + 30
            let name = target, box = failure, holder = self.holder
            worker.run("standby") {
                do throws(AudioError) {
                    try holder.warm(DeviceConfiguration(name: name, standby: holder))
                    box.put(nil)
                } catch {
                    box.put(error.description)     // for the log, in English
                }
                return nil
            }
        } else if !want, held != nil {
            log.info("output-standby: the device is closed until the next session")
            let holder = self.holder
            worker.run("standby off") {
                holder.release()
                return nil
            }
        }
    }

    /// The daemon ends: nothing is kept.
    func shutdown() {
        holder.keepsOpen = false
        holder.release()
    }

    /// The device configuration for a session on `name`.
    func device(_ name: DeviceName) -> DeviceConfiguration { DeviceConfiguration(name: name, standby: holder) }
}

/// The last failure to open the device for the standby, from the worker to the loop.
private final class FailureBox: Sendable {
    private let value = Mutex<String??>(nil)
    func put(_ message: String?) { value.withLock { $0 = .some(message) } }
    /// What the worker reported since the last call: nil nothing, .some(nil) a success,
    /// .some(message) a failure.
    func take() -> String?? {
        value.withLock { v in
            defer { v = nil }
            return v
        }
    }
}
