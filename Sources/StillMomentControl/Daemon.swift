// The daemon as a process: the lock and the socket's path, signals, the loop, idle exit and
// housekeeping, and the order in which its long-running parts start and stop. The parts:
// the device warm-up, the session service (with its device worker, scheduler and standby
// keeper), the background indexer, the control-socket listener (SocketListener.swift), and
// the home front-ends: the buttons (Home/ButtonWatcher.swift) and the LED (Home/LED.swift),
// the MQTT bridge to Home Assistant (MQTT/MQTTBridge.swift) when the `mqtt-*` settings ask,
// and sync with a hub when this device is paired with one (Sync/SyncKeeper.swift).
import CSystem
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import StillMomentAudio
import StillMomentCore
import Synchronization

/// The daemon: one process that owns the sound device, plays one session at a time and
/// serves the control socket. One thread runs a poll loop over the listener's sockets and
/// the device worker's wake-up; the audio runs on the engine's own threads, so a slow or
/// hostile client can delay an answer but never the sound.
///
/// Start, in order: the lock and the socket (init), the session service and the indexer
/// (init), the device warm-up, the LED and the buttons, and the MQTT bridge (run), then the
/// loop serves. Stop, in the reverse order (`shutdown`): the MQTT bridge says `offline` and
/// disconnects, the buttons are closed (no new action), the session fades out and the
/// device is released, the LED goes off, the last events reach the clients, the listener
/// closes its connections, the indexer halts after its file, a
/// warm-up still running is waited for; the socket and the lock go last (deinit).
public final class Daemon {
    public struct Options: Sendable {
        /// Started by a client (not by systemd): exits after `idleExit` seconds with no session.
        public var onDemand: Bool
        public var idleExit: Double
        /// A client must say hello within this many seconds.
        public var helloTimeout: Double = 5
        public var maxClients: Int = 128
        /// A client that reads nothing is dropped once this much waits for it.
        public var maxBacklog: Int = 256 * 1024
        /// A connection that neither asks nor listens (no subscription) is closed after this.
        public var idleTimeout: Double = 300
        /// Idle this long, it stores the frame index of older MP3 meditations and the length
        /// of older imported sounds (BackgroundIndexer).
        public var indexAfterIdle: Double = 10
        /// The program's version (Home Assistant's device page shows it).
        public var version: String = ""

        public init(onDemand: Bool, idleExit: Double = 600) {
            self.onDemand = onDemand
            self.idleExit = idleExit
        }
    }

    private let options: Options
    private let log: Logger
    private let host: SessionService
    private let indexer: BackgroundIndexer
    private let sync: SyncKeeper
    private let listener: SocketListener
    private let store: LibraryStore
    /// The buttons, in the poll set (their actions go through the service's typed calls).
    private let buttons: ButtonWatcher
    private var led: LED?
    /// The service's count of rereads the buttons and the LED last followed.
    private var rereadsSeen = 0
    private let mqtt: MQTTBridge
    private var lockFD: Int32
    private let socketPath: String
    /// The socket file we bound (device, inode): only that one is ours to remove.
    private var socketID: (dev_t, ino_t)
    private let stopSignal = StopFlag()
    /// Takes the daemon lock and the socket (replacing a stale one), and opens the store.
    /// Throws `.refused(code: "running", …)` when another daemon holds the lock.
    public init(options: Options, log: Logger) throws(ControlError) {
        self.options = options
        self.log = log
        try ControlPaths.prepareFolder()
        socketPath = ControlPaths.socket
        let (fd, listening, id) = try Self.takeSocket(socketPath, log: log)
        lockFD = fd
        socketID = id
        // The buttons' and hooks' tables: the daemon hosts them, whoever made the process.
        HomeRegistration.register()
        do {
            let store = try LibraryStore()
            self.store = store
            let host = SessionService(store: store, log: log)
            self.host = host
            buttons = ButtonWatcher(log: log) { button, kind, action in
                Self.perform(host, log, button, kind, action)
            }
            indexer = BackgroundIndexer(store: store, log: log)
            sync = SyncKeeper(store: store, log: log)
            listener = SocketListener(listenFD: listening, options: options, host: host, log: log)
            mqtt = MQTTBridge(host: host, log: log, version: options.version)
        } catch {
            close(listening)
            unlink(socketPath)
            close(fd)
            throw ControlError.io(error.description)
        }
    }

    deinit {
        sync.halt()
        indexer.halt()
        listener.stop()
        close(listener.listenFD)
        if ownsSocket { unlink(socketPath) }    // never another daemon's
        close(lockFD)
    }

    /// Takes the daemon lock (its file must still be the one at its path: a folder cleared
    /// under us is no lock) and binds the socket, replacing one left by a dead daemon.
    private static func takeSocket(_ socketPath: String, log: Logger) throws(ControlError) -> (Int32, Int32, (dev_t, ino_t)) {
        let lockPath = ControlPaths.lock
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ControlError.io("cannot open \(lockPath): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            var buf = [UInt8](repeating: 0, count: 32)
            let n = pread(fd, &buf, buf.count, 0)
            close(fd)
            let pid = n > 0 ? String(decoding: buf[0..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : "?"
            throw ControlError.alreadyRunning(pid: pid)
        }
        var held = stat(), named = stat()
        guard fstat(fd, &held) == 0, stat(lockPath, &named) == 0, held.st_ino == named.st_ino, held.st_dev == named.st_dev else {
            close(fd)
            throw ControlError.io("\(lockPath) changed while the daemon started; start it again")
        }
        let pidText = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pwrite(fd, pidText, pidText.count, 0)
        // We hold the lock, so a socket left here belongs to a daemon that died.
        var st = stat()
        if lstat(socketPath, &st) == 0 {
            unlink(socketPath)
            log.notice("replaced a stale socket at \(socketPath)")
        }
        let listening = sm_unix_listen(socketPath, 64)
        guard listening >= 0 else {
            close(fd)
            throw ControlError.io("cannot listen on \(socketPath): \(String(cString: strerror(-listening)))")
        }
        guard lstat(socketPath, &st) == 0 else {
            close(listening)
            close(fd)
            throw ControlError.io("cannot find the socket just made at \(socketPath)")
        }
        do { try ControlPaths.shareWithGroup(socketPath) } catch {
            close(listening)
            close(fd)
            throw error
        }
        return (fd, listening, (st.st_dev, st.st_ino))
    }

    /// Whether the socket at our path is still the one we bound.
    private var ownsSocket: Bool {
        var st = stat()
        return lstat(socketPath, &st) == 0 && st.st_dev == socketID.0 && st.st_ino == socketID.1
    }

    /// The runtime folder was cleared under us (logind removes /run/user/UID at the last
    /// logout): listen again, so that clients find the session still playing.
    private func listenAgain() -> Bool {
        do {
            try ControlPaths.prepareFolder()
            let (fd, listening, id) = try Self.takeSocket(socketPath, log: log)
            close(listener.listenFD)
            close(lockFD)
            lockFD = fd
            listener.listenFD = listening
            socketID = id
            log.notice("the control socket was removed; listening again on \(socketPath)")
            return true
        } catch {
            log.error("the control socket was removed and cannot be made again: \(error.description)")
            return false
        }
    }

    /// Serves until SIGTERM/SIGINT (the session fades out over 1 s and the device is
    /// released) or, when started on demand, until no session played for `idleExit`.
    public func run() {
        signal(SIGPIPE, SIG_IGN)
        signal(SIGHUP, SIG_IGN)
        // A signal wakes the loop at once, however long it would sleep (5 s when idle).
        let worker = host.worker
        stopSignal.install([SIGTERM, SIGINT]) { worker.poke() }
        log.info("listening on \(socketPath) (pid \(getpid()), \(options.onDemand ? "started on demand" : "service"))")
        // The device's configuration and libraries, loaded while nothing waits for them
        // (a settings file that cannot be read is the first session's to report).
        if let settings = try? Settings.load(), let device = try? DeviceName.setting(settings) { DeviceWarmup.begin(device: device) }
        loadHome()
        // Every state change, whoever caused it (a client, a button, the schedule), as it goes out.
        listener.observe = { [weak self] events in
            guard let self else { return }
            mqtt.observe(events)
            guard let led else { return }
            for case .state(let status) in events { led.show(LED.look(status)) }
        }
        // MQTT when the settings ask (libmosquitto loaded only then; its network on its own thread).
        mqtt.follow(force: true)
        while step() {}
        shutdown()
    }

    /// The parts stop in the reverse order of their start: the session fades out and the
    /// device is released (a device kept open too), the clients get the last events and
    /// are closed, the indexer halts after its file, and a warm-up still running is waited
    /// for (not exiting with a thread inside alsa-lib). Each step is harmless twice.
    private func shutdown() {
        mqtt.stop()
        buttons.closeAll()
        host.shutdown()
        led?.show(.off)
        listener.broadcast(host.takeEvents())
        listener.stop()
        sync.halt()
        indexer.halt()
        DeviceWarmup.finish()
    }

    /// The loop's state between steps.
    private var idleSince = 0.0
    private var lastCheck = 0.0
    private var reachable = true
    private var started = false
    /// Since when no session plays, and whether the code pages were released since.
    private var sessionIdleSince = 0.0
    private var codeReleased = false
    /// The session playing, since when, and whether its start-up's code pages were released.
    private var playing: (id: Int, since: Double, released: Bool)?

    /// One turn of the loop: waits (at most `cap` ms, less when something is due) for
    /// the sockets and the device worker, serves what came, ticks the service, and
    /// applies the connection policy. False once the daemon should exit. (`run` turns it
    /// until then; tests turn it themselves.)
    func step(cap: Int32? = nil) -> Bool {
        if !started {
            started = true
            idleSince = now()
            lastCheck = now()
            sessionIdleSince = now()
        }
        if let sig = stopSignal.received {
            log.info("signal \(sig): ending")
            return false
        }
        // Idle with nobody connected, the loop sleeps until the socket watchdog's next
        // look (5 s) or the next scheduled entry, whichever comes first. A session looks at
        // its engine every 100 ms while someone follows its states (a subscriber, Home
        // Assistant, the LED). Else it sleeps until the session's cadence (what was heard,
        // every 5 s) or the release of its start's code (3 s in): its end and a failure wake
        // the loop (HostedSession's engine), and commands come through the sockets. Ten
        // wake-ups a second were a third of the daemon's CPU playing an MP3 to PulseAudio,
        // and one a second (its progress cadence, which nobody read then) a fifth of the rest.
        let watched = listener.hasSubscribers || mqtt.isConnected || led != nil
        let sleep: Int32 = min(host.isIdle ? (listener.isEmpty ? 5000 : 250) : (watched ? 100 : unwatchedSessionSleep()),
                               mqtt.dueWithinMs ?? .max)
        let due = buttons.timeout().map { min($0, sleep) } ?? sleep
        pollOnce(timeoutMs: host.pollTimeout(cap: min(due, cap ?? due)))
        buttons.tick()
        host.tick()
        let events = host.takeEvents()
        listener.broadcast(events)
        if host.rereads != rereadsSeen {
            rereadsSeen = host.rereads
            loadHome()
        }
        let t = now()
        // The MQTT bridge: what came in (commands run as the listener's do), then what went
        // out; the settings file looked at (a stat) for `mqtt enable` and `disable`.
        mqtt.publishEvents()
        mqtt.serve()
        listener.broadcast(host.takeEvents())
        mqtt.publish()
        mqtt.follow()
        if t - lastCheck >= 5 {
            lastCheck = t
            if reachable && !ownsSocket {
                reachable = listenAgain()
            }
            if !reachable && host.isIdle {
                log.info("unreachable and nothing playing: exiting")
                return false
            }
        }
        // Idle for 2 s: what start-up and the last session touched of the code is released;
        // and 3 s into each session, what its start touched (the catalog, the decoder's
        // opening, the plan): playing runs far less code than starting.
        if host.isIdle {
            if !codeReleased && t - sessionIdleSince >= 2 {
                CodePages.release()
                codeReleased = true
            }
        } else {
            sessionIdleSince = t
            codeReleased = false
        }
        // Idle a while: older MP3s get their frame index, until a session starts; what it
        // touched is released again once it ends.
        if host.isIdle && t - sessionIdleSince >= options.indexAfterIdle {
            indexer.start()
        } else if !host.isIdle {
            indexer.pause()
        }
        if indexer.takeEnded() || mqtt.takeAnnounced() { codeReleased = false }
        if playing != nil && host.activeSession == nil { sync.soon(t) }
        sync.tick(t)
        // Entries a cycle brought (another device's schedule) ring without a restart.
        if sync.takeChanged() { _ = host.reschedule() }
        if let id = host.activeSession {
            if playing?.id != id { playing = (id, t, false) }
            if let p = playing, !p.released, t - p.since >= 3 {
                CodePages.release()
                playing?.released = true
            }
        } else {
            playing = nil
        }
        // A client that is connected may be about to start a session: not idle.
        if !host.isIdle || !listener.isEmpty {
            idleSince = t
        }
        listener.enforcePolicy()
        // A daemon that keeps a schedule, watches a button or speaks MQTT does not exit when idle.
        if options.onDemand, host.isIdle, !host.keepsTime, buttons.count == 0, !mqtt.keepsDaemon, t - idleSince > options.idleExit {
            log.info("no session for \(Int(options.idleExit)) s: exiting")
            listener.flushAll()
            return false
        }
        return true
    }

    /// How long a turn may sleep while a session plays and nobody follows it (ms): until
    /// its cadence, or its start's code release, at most the socket watchdog's 5 s (1 s
    /// with a connection open); a session still starting looks once a second.
    private func unwatchedSessionSleep() -> Int32 {
        guard let cadence = host.sessionSleep else { return 1000 }
        // A connection (not a subscriber) is held to its hello and idle limits within a
        // second, as before.
        var sleep = min(listener.isEmpty ? 5000 : 1000, cadence)
        if let p = playing, !p.released {
            sleep = min(sleep, Int32(clamping: Int64(max(0, (p.since + 3 - now()) * 1000).rounded(.up))))
        }
        return max(1, sleep)
    }

    /// Serves a connection made elsewhere (a socketpair in the tests) as if accepted.
    func adopt(_ fd: Int32) { listener.adopt(fd) }

    /// The connections served now.
    var clientCount: Int { listener.clientCount }

    /// "5" for 5 s, "0.2" for 200 ms.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String((value * 1000).rounded() / 1000)
    }

    /// The background indexer's state: running, done, how many indexes and sound lengths it stored.
    var indexing: (running: Bool, finished: Bool, stored: Int, counted: Int) {
        (indexer.isRunning, indexer.isFinished, indexer.stored, indexer.counted)
    }

    // MARK: the loop

    private func pollOnce(timeoutMs: Int32) {
        // The listener's sockets, the buttons' devices, the MQTT client's queue, and the
        // device worker's wake-up last: the queue and the completions are taken in by the
        // step after the poll.
        var fds = listener.pollDescriptors()
        let listened = fds.count
        fds += buttons.pollDescriptors()
        let watched = fds.count
        if let fd = mqtt.pollFD { fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
        fds.append(pollfd(fd: host.wakeFD, events: Int16(POLLIN), revents: 0))
        let n = poll(&fds, nfds_t(fds.count), timeoutMs)
        guard n > 0 else { return }
        // What came in came by now (a relative seek counts from here).
        listener.serve(fds[0..<listened], arrived: MonotonicClock.nanoseconds())
        buttons.serve(fds[listened..<watched])
    }

    // MARK: the home front-ends

    /// (Re)reads the buttons and the LED's setting (at the start, and when the CLI says the
    /// stored ones changed).
    private func loadHome() {
        do { buttons.load(try ButtonStore(store: store).all()) } catch { log.error("buttons: \(error.description)") }
        let name = (try? Settings.load()).flatMap { try? LEDName($0.value("led")).name }
        if name == nil { led?.show(.off) }
        led = name.map { LED(name: $0, log: log) }
        led?.show(LED.look(host.status()))
    }

    /// A button's gesture, sent as every front-end sends its request (a toggle looks at
    /// the status first).
    private static func perform(_ host: SessionService, _ log: Logger, _ button: Button, _ kind: Gesture.Kind, _ action: ButtonAction) {
        let request = action.request(status: host.status())
        do {
            let status = try host.call(request)
            log.info("button \(button.id): \(kind.rawValue) → \(request.command.rawValue) (\(status.state.rawValue)\(status.session.map { ", session \($0)" } ?? ""))")
        } catch {
            log.notice("button \(button.id): \(kind.rawValue) → \(request.command.rawValue) refused: \(error.words.en)")
        }
    }

    /// Watches these buttons instead of the stored ones (tests: FIFOs that carry input events).
    func watchButtons(_ list: [Button]) { buttons.load(list) }

    /// The buttons' devices open now.
    var buttonsOpen: Int { buttons.openCount }

    /// When the buttons next need the loop (ms; nil: only when a descriptor wakes it).
    var buttonsDue: Int32? { buttons.timeout() }

    /// The service's status (tests).
    var status: Status { host.status() }

    private func now() -> Double { MonotonicClock.seconds() }
}

/// Signals become a flag that a loop reads (the daemon's within 100–250 ms, a client's
/// view within 100 ms): the default action, dying on the spot, is turned off for them.
public final class StopFlag {
    private final class Box: Sendable { let value = Atomic<Int32>(0) }
    private let box = Box()
    private var sources: [DispatchSourceSignal] = []

    public init(_ signals: [Int32] = []) { install(signals) }

    /// `wake` runs after the flag is set (the daemon's loop is woken from its poll by it).
    public func install(_ signals: [Int32], wake: @escaping @Sendable () -> Void = {}) {
        for sig in signals {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            let box = self.box
            source.setEventHandler {
                box.value.store(sig, ordering: .releasing)
                wake()
            }
            source.resume()
            sources.append(source)
        }
    }

    /// The signal received, if any.
    public var received: Int32? {
        let s = box.value.load(ordering: .acquiring)
        return s == 0 ? nil : s
    }
}
