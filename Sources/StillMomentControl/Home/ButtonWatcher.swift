// The daemon's buttons: each button's input device open in the daemon's poll set (no
// polling: its descriptor wakes the loop), its key's edges turned into gestures, and each
// gesture's action handed to `perform` (the daemon sends it through the session service as
// every front-end does). A device that goes away (unplugged, EOF, ENODEV) is closed, and
// its node's appearance is waited for through inotify (DeviceAppearance: no timer, no
// wake-up while it is away); a node that is there but cannot be opened is tried every 2 s.
// A device the daemon may not read is said once, with what to do (the `input` group), and
// opened when its permissions change.
import CSystem
import Glibc
import Logging
import StillMomentAudio
import StillMomentCore

final class ButtonWatcher {
    /// A gesture taken: which button, which gesture, what to do.
    typealias Perform = (Button, Gesture.Kind, ButtonAction) -> Void

    static let reopenMs: Int64 = 2000

    private final class Watched {
        let button: Button
        let actions: [Gesture.Kind: ButtonAction]
        var gesture: Gesture
        var fd: Int32 = -1
        /// When to try to open it again (ms), while closed; nil: when its folder changes.
        var retryAt: Int64?
        /// The last problem said in the log (said again only when it changes).
        var problem: String?

        init(_ button: Button, _ actions: [Gesture.Kind: ButtonAction]) {
            self.button = button
            self.actions = actions
            gesture = Gesture(hasHold: actions[.hold] != nil, hasDouble: actions[.double] != nil)
        }
    }

    private var watched: [Watched] = []
    /// The folders of the devices that are away.
    private let appearance = DeviceAppearance()
    /// inotify could not be had: devices that are away are tried every 2 s.
    private var timed = false
    private let log: Logger
    private let perform: Perform
    private let eventSize = Int(sm_input_event_size())

    init(log: Logger, perform: @escaping Perform) {
        self.log = log
        self.perform = perform
    }

    deinit {
        closeAll()
        appearance.stop()
    }

    /// Watches these buttons from now on (the ones before are closed).
    func load(_ buttons: [Button]) {
        // What was said of a button is kept when it is loaded again unchanged (the CLI asks
        // the daemon to read them again after each change): a problem is said once.
        let said = Dictionary(watched.map { ("\($0.button.id) \($0.button.device.path)", $0.problem) }, uniquingKeysWith: { a, _ in a })
        closeAll()
        watched = buttons.compactMap { button in
            var actions: [Gesture.Kind: ButtonAction] = [:]
            for (kind, text) in button.actions {
                do throws(CoreError) {
                    actions[kind] = try ButtonAction(parsing: text)
                } catch {
                    log.error("button \(button.id): its \(kind.rawValue) action '\(Display.clean(text))' is refused: \(error.description)")
                }
            }
            guard !actions.isEmpty else { return nil }
            let w = Watched(button, actions)
            w.problem = said["\(button.id) \(button.device.path)"] ?? nil
            return w
        }
        openMissing()
    }

    var count: Int { watched.count }
    /// How many devices are open now.
    var openCount: Int { watched.filter { $0.fd >= 0 }.count }

    func closeAll() {
        for w in watched where w.fd >= 0 {
            close(w.fd)
            w.fd = -1
        }
        appearance.stop()
    }

    /// The open devices and the folders of the missing ones, for the daemon's poll.
    func pollDescriptors() -> [pollfd] {
        var fds = watched.filter { $0.fd >= 0 }.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        if appearance.fd >= 0 { fds.append(pollfd(fd: appearance.fd, events: Int16(POLLIN), revents: 0)) }
        return fds
    }

    /// Watches the folders of the devices that are away (before trying them, so a node
    /// made in between is seen), tries them, and watches what is still away.
    private func openMissing() {
        watchFolders()
        let now = MonotonicClock.milliseconds()
        for w in watched where w.fd < 0 { open(w, now: now) }
        watchFolders()
    }

    private func watchFolders() {
        let away = watched.filter { $0.fd < 0 }
        timed = !appearance.wait(for: away.map(\.button.device.path), roots: Array(Set(away.map(\.button.device.root))))
    }

    /// Reads the devices that poll found ready (in the order `pollDescriptors` gave them),
    /// then does what is due.
    func serve(_ fds: ArraySlice<pollfd>) {
        let now = MonotonicClock.milliseconds()
        var appeared = false
        for p in fds where p.revents != 0 {
            if p.fd == appearance.fd {
                appearance.drain()
                appeared = true
            } else if let w = watched.first(where: { $0.fd == p.fd }) {
                read(w, now: now)
            }
        }
        if appeared { openMissing() }
        tick()
    }

    /// Gestures that are due, and devices to open again.
    func tick() {
        let now = MonotonicClock.milliseconds()
        if watched.contains(where: { w in w.fd < 0 && (w.retryAt.map { now >= $0 } ?? false) }) {
            watchFolders()
            for w in watched where w.fd < 0 && (w.retryAt.map { now >= $0 } ?? false) { open(w, now: now) }
            watchFolders()
        }
        for w in watched {
            for kind in w.gesture.tick(now: now) { take(kind, w) }
        }
    }

    /// Milliseconds until something is due (a gesture's deadline, a device to open again).
    func timeout() -> Int32? {
        let now = MonotonicClock.milliseconds()
        let due = watched.compactMap { w -> Int64? in
            let r: Int64? = w.fd < 0 ? w.retryAt : nil
            return [w.gesture.deadline, r].compactMap { $0 }.min()
        }.min()
        return due.map { Int32(clamping: max(0, $0 - now)) }
    }

    private func take(_ kind: Gesture.Kind, _ w: Watched) {
        guard let action = w.actions[kind] else { return }
        perform(w.button, kind, action)
    }

    private func say(_ w: Watched, _ problem: String, error: Bool) {
        guard w.problem != problem else { return }
        w.problem = problem
        if error { log.error("button \(w.button.id): \(problem)") } else { log.notice("button \(w.button.id): \(problem)") }
    }

    /// When a device that is away is tried again: when its folder changes (nil), or in
    /// 2 s for a node that is there but cannot be used (or when inotify is not to be had).
    private func retry(_ w: Watched, now: Int64) -> String {
        if !timed && DeviceAppearance.nodeMissing(w.button.device.path) {
            w.retryAt = nil
            return "waiting for it to come back"
        }
        w.retryAt = now + Self.reopenMs
        return "trying again every \(Self.reopenMs / 1000) s"
    }

    private func open(_ w: Watched, now: Int64) {
        let path = w.button.device.path
        let resolved: String
        do {
            resolved = try w.button.device.resolve()
        } catch {
            let next = retry(w, now: now)
            say(w, "\(error.description); \(next)", error: false)
            return
        }
        let fd = sm_evdev_open(resolved)
        guard fd >= 0 else {
            if -fd == EACCES || -fd == EPERM {
                // Opened when its permissions change (udev gives it the group a moment
                // after making it; a chmod), or tried every 2 s without inotify.
                w.retryAt = timed ? now + Self.reopenMs : nil
                say(w, "cannot read \(Display.clean(path)): permission denied. Add the daemon's user to the 'input' group (sudo adduser \(Self.userName()) input), then log in again and restart the daemon", error: true)
            } else {
                let next = retry(w, now: now)
                say(w, "cannot open \(Display.clean(path)): \(String(cString: strerror(-fd))); \(next)", error: false)
            }
            return
        }
        w.fd = fd
        w.retryAt = nil
        var name = [CChar](repeating: 0, count: 128)
        let label = sm_evdev_name(fd, &name, Int32(name.count)) > 0 ? " (\(Display.clean(String(decoding: name.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))))" : ""
        if sm_evdev_has_key(fd, Int32(w.button.key)) == 0 {
            log.warning("button \(w.button.id): \(Display.clean(path))\(label) has no key \(KeyName.name(w.button.key)); `stillmoment button test` shows its keys")
        }
        w.problem = nil
        log.info("button \(w.button.id): watching \(Display.clean(path))\(label) for \(KeyName.name(w.button.key))")
    }

    private func read(_ w: Watched, now: Int64) {
        var buf = [UInt8](repeating: 0, count: eventSize * 64)
        var events = [sm_key_event](repeating: sm_key_event(), count: 64)
        while w.fd >= 0 {
            let n = Glibc.read(w.fd, &buf, buf.count)
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            if n <= 0 {
                let why = n == 0 ? "it went away" : String(cString: strerror(errno))
                close(w.fd)
                w.fd = -1
                watchFolders()
                let next = retry(w, now: now)
                say(w, "\(Display.clean(w.button.device.path)): \(why) (unplugged?); \(next)", error: false)
                // A key held when the device went counts as nothing.
                w.gesture = Gesture(hasHold: w.actions[.hold] != nil, hasDouble: w.actions[.double] != nil)
                return
            }
            let count = Int(sm_evdev_decode(buf, Int32(n), &events, Int32(events.count)))
            for e in events[0..<count] where Int(e.code) == w.button.key && e.value != 2 {
                // The kernel's time of the edge (monotonic), never later than now nor from
                // another clock (a device that refused the monotonic clock: now).
                let at = e.ms <= now && now - e.ms < 1000 ? e.ms : now
                for kind in w.gesture.key(down: e.value == 1, at: at) { take(kind, w) }
            }
            if n < buf.count { return }
        }
    }

    static func userName() -> String {
        guard let pw = getpwuid(getuid()), let name = pw.pointee.pw_name else { return "$USER" }
        return String(cString: name)
    }
}
