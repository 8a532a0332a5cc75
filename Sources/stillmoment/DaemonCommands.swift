import ArgumentParser
import FoundationEssentials
import Glibc
import Logging
import StillMomentControl
import StillMomentCore

struct DaemonCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Run the daemon that owns the sound device (in the foreground, for systemd).",
        discussion: """
            `timer`, `play` and `preview` start one when none runs. It listens on \
            $XDG_RUNTIME_DIR/stillmoment/control.sock and logs to stderr (the journal under systemd).
            """
    )

    @Flag(name: .customLong("on-demand"), help: .hidden) var onDemand = false
    @Option(name: .customLong("ready-fd"), help: .hidden) var readyFD: Int32?

    func invocation() -> Invocation { .daemon(onDemand: onDemand, readyFD: readyFD) }
    func run() throws { try invocation().run() }

    /// Serves until stopped; `onDemand`: started by a client, leaves when another daemon won
    /// the race. `readyFD`: the client's pipe, told (a byte, then closed) once it listens;
    /// closed without the byte when it does not (the client then reads why in the log at once).
    static func serve(onDemand: Bool, readyFD: Int32? = nil) throws {
        // A client that stopped waiting has closed its end: the byte must not kill us.
        signal(SIGPIPE, SIG_IGN)
        let ready = readyFD.flatMap(ReadyPipe.init)
        defer { ready?.close() }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .info
            return handler
        }
        let log = Logger(label: "stillmoment.daemon")
        var options = Daemon.Options(onDemand: onDemand)
        options.version = stillmomentVersion
        if let idle = Environment.value("STILLMOMENT_IDLE_EXIT") {
            // A number of seconds from 0 to a year; anything else (text, nan, inf, -1,
            // 1e300: the log line prints it as an Int) is refused here, in a line.
            if let seconds = Double(idle), seconds.isFinite, seconds >= 0, seconds <= 31_536_000 {
                options.idleExit = seconds
            } else {
                log.warning("STILLMOMENT_IDLE_EXIT=\(Display.clean(idle)) is not a number of seconds from 0 to 31536000: exiting after \(Int(options.idleExit)) idle seconds")
            }
        }
        signal(SIGXFSZ, SIG_IGN)
        let daemon: Daemon
        do {
            daemon = try Daemon(options: options, log: log)
            ready?.notify(ReadyByte.serving)
        } catch {
            // Two clients may start a daemon at once: the one that lost the race just leaves.
            if case .alreadyRunning = error, onDemand {
                ready?.notify(ReadyByte.anotherServes)
                log.info("\(error.description): leaving it to serve")
                return
            }
            // Exits here, the readiness pipe left to the kernel: the client hears of the
            // failure once this process is gone, not while it still unwinds.
            Console.error(error.description)
            Glibc.exit(Exit.failure)
        }
        daemon.run()
    }
}

/// Connects to the daemon; `start` starts one if none runs. Exits 1 with one line on failure.
func connectDaemon(start: Bool) throws -> ControlClient {
    do {
        let client = try ControlClient.connect(startIfNeeded: start)
        // The system service (a member of its group talking to it) keeps its own store, of
        // its own user: only a daemon of ours must use our store.
        if start, !client.daemonHome.isEmpty, client.daemonHome != Paths.home,
           realPath(client.daemonHome) != realPath(Paths.home), ownedByUs(client.daemonHome) {
            let pid = client.daemonPID, theirs = client.daemonHome, ours = Paths.home
            throw Console.fail(tr("the running daemon (pid \(pid)) uses the store \(theirs), not \(ours); stop it with `kill \(pid)` or use the same STILLMOMENT_HOME",
                                  "der laufende Daemon (PID \(pid)) benutzt die Bibliothek in \(theirs), nicht in \(ours); beende ihn mit `kill \(pid)` oder nimm dasselbe STILLMOMENT_HOME"))
        }
        return client
    } catch let error as ControlError {
        throw Console.fail(error.description)
    }
}

/// Whether the folder is ours (false when it cannot be looked at: another user's).
private func ownedByUs(_ path: String) -> Bool {
    var st = stat()
    return stat(path, &st) == 0 && st.st_uid == geteuid()
}

private func realPath(_ path: String) -> String {
    guard let p = realpath(path, nil) else { return path }
    defer { free(p) }
    return String(cString: p)
}

/// A refused request as an exit: a device that cannot open exits 3, bad input 2, nothing playing 1.
func failure(_ error: ControlError) -> ExitCode {
    if case .refused(let code, let words) = error {
        return Console.fail(words.text(), code: Exit.code(for: code))
    }
    return Console.fail(error.description)
}

/// Sends a session to the daemon (starting one if needed), then follows it unless detached.
func submit(_ request: Request, detach: Bool, what: String) throws {
    let client = try connectDaemon(start: true)
    do {
        try client.send(.subscribe(progress: !detach))    // before the start: no event is missed
        var status = try client.send(request)
        let session = status.session ?? 0
        if detach {
            // The device is opened on the daemon's worker (after the fade of the session
            // before, if one plays): its start, or why it could not, is known within a moment.
            var waited = 0
            waiting: while status.state == .starting, status.session == session, waited < 100 {
                guard let event = try client.nextTypedEvent(timeoutMs: 100) else { waited += 1; continue }
                switch event {
                case .ended(let e) where e.session == session && e.reason == .failed:
                    throw Console.fail(e.message?.text() ?? tr("the session failed", "die Sitzung ist fehlgeschlagen"),
                                       code: e.code == .device ? Exit.device : Exit.failure)
                case .ended(let e) where e.session == session:
                    break waiting     // replaced or stopped by another client meanwhile: it was started
                case .state(let s) where s.session == session: status = s
                default: break
                }
            }
            let pid = client.daemonPID
            Console.out(tr("started \(what) (session \(session), daemon pid \(pid)); `stillmoment attach` follows it, `stillmoment stop` ends it",
                           "gestartet: \(what) (Sitzung \(session), Daemon-PID \(pid)); `stillmoment attach` zeigt sie, `stillmoment stop` beendet sie"))
            return
        }
        var attachment = Attachment(client: client, session: session, status: status)
        let code = attachment.run()
        if code != 0 { throw ExitCode(code) }
    } catch let error as ControlError {
        throw failure(error)
    }
}

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Show what the daemon is playing.")
    @Flag(help: "Print the daemon's status object as JSON.") var json = false

    func invocation() -> Invocation { .status(json: json) }
    func run() throws { try invocation().run() }

    /// Prints the daemon's status (a line, or its JSON object); idle when none runs.
    static func show(json: Bool) throws {
        let status: JSON
        let typed: Status
        do throws(ControlError) {
            status = try ControlClient.connect().answer(.status)
            guard let t = status.decoded(as: Status.self) else { throw ControlError.lost(tr("the daemon's status cannot be read", "der Status des Daemons ist nicht lesbar")) }
            typed = t
        } catch {
            guard error == .noDaemon else { throw failure(error) }
            Console.out(json ? jsonText(.object(["state": .string("idle"), "daemon": .null]))
                             : tr("idle (no daemon running)", "nichts läuft (kein Daemon aktiv)"))
            return
        }
        if json {
            Console.out(jsonText(status))
            return
        }
        Console.out(StatusText.summary(typed))
        if let room = typed.room, let clock = typed.clock {
            let bound = (try? RoomSettings(try Settings.load()))?.clockBoundMilliseconds ?? 2
            Console.out(tr("room \(room); clock ", "Raum \(room); Uhr ") + RoomCommand.clockText(clock, bound: bound))
        }
        if let s = typed.suspended {
            let name = s.name
            let at = TimeText.clock(s.position)
            Console.out(tr("paused by a timer: \(name) at \(at); `stillmoment resume` continues it once nothing else plays",
                           "von einem Timer pausiert: \(name) bei \(at); `stillmoment resume` setzt sie fort, sobald nichts anderes spielt"))
        }
    }
}

/// pause, resume, stop: one request each.
protocol SimpleControlCommand: ParsableCommand {
    static var request: Request { get }
}

extension SimpleControlCommand {
    func invocation() -> Invocation { .request(Self.request) }
    func run() throws { try invocation().run() }
}

/// One request to the running daemon (never starting one); its answer, or the exit. A
/// session it starts (resume, ring-now) is opened on the daemon's worker: the answer is the
/// status once it plays, or the exit that says why it could not (within 10 s).
func control(_ request: Request, start: Bool = false) throws -> Status {
    do {
        let client = try ControlClient.connect(startIfNeeded: start)
        let answer = try client.send(request)
        guard answer.state == .starting, let session = answer.session else { return answer }
        // The answer says where it starts; it is given once the device opened (the session
        // may have played on by then: on `null` many times real time).
        for _ in 0..<500 {
            usleep(20_000)
            let status = try client.send(.status)
            if let ended = status.lastEnded, ended.session == session, ended.reason == .failed {
                throw Console.fail(ended.message?.text() ?? tr("the session failed", "die Sitzung ist fehlgeschlagen"),
                                   code: ended.code == .device ? Exit.device : Exit.failure)
            }
            if status.state != .starting || status.session != session { break }
        }
        return answer
    } catch let error as ControlError {
        throw error == .noDaemon ? Console.fail(tr("nothing is playing (no daemon running)", "nichts spielt (kein Daemon aktiv)")) : failure(error)
    }
}

struct PauseCommand: SimpleControlCommand {
    static let configuration = CommandConfiguration(commandName: "pause", abstract: "Pause the session playing now.")
    static let request = Request.pause
}

struct ResumeCommand: SimpleControlCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Resume a paused session (or the guided meditation a timer paused).")
    static let request = Request.resume
}

struct StopCommand: SimpleControlCommand {
    static let configuration = CommandConfiguration(commandName: "stop", abstract: "Stop the session (a 1-s fade).")
    static let request = Request.stop
}

struct FinishCommand: SimpleControlCommand {
    static let configuration = CommandConfiguration(
        commandName: "finish",
        abstract: "End the running timer now with its end gong and ring-out, as a completed sit (`stop` fades out instead).")
    static let request = Request.finish
}

struct SeekCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seek",
        abstract: "Move within the guided meditation playing now.",
        discussion: "One target: +TIME or -TIME moves forward or back from where it plays (+15s, -1m30s), a plain TIME goes to that position in the meditation (12:30, 1:02:03, 90s). A position past the end ends it; one before the start goes to the start.")
    @Argument(parsing: .allUnrecognized, help: "One target: +TIME, -TIME or a position (MM:SS, H:MM:SS, 90s).") var target: [String] = []

    func invocation() throws -> Invocation {
        let words = target.filter { $0 != "--" }
        guard words.count == 1, let text = words.first else {
            throw Console.fail(tr("seek takes one position: +15s, -15s or MM:SS", "seek nimmt genau ein Ziel: +15s, -15s oder MM:SS"), code: Exit.usage)
        }
        return .seek(target: text)
    }

    func run() throws { try invocation().run() }

    /// +TIME or -TIME from where it plays, or a position.
    static func seek(_ text: String) throws {
        let seek: SeekRequest
        do {
            if text.hasPrefix("+") || text.hasPrefix("-") {
                // From when this command started: what the user heard when they asked.
                let ms = try TimeText.parse(String(text.dropFirst()))
                seek = .by(text.hasPrefix("-") ? -ms : ms, at: Int64(ProcessClock.start / 1000))
            } else {
                seek = .to(try TimeText.parse(text))
            }
        } catch {
            throw Console.fail("seek: \(error.description)", code: Exit.usage)
        }
        Console.out(StatusText.summary(try control(.seek(seek))))
    }
}

struct AttachCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attach",
        abstract: "Follow the session playing now, with its live view and keys.",
        discussion: "On a terminal: space pauses or resumes, left/right seek 15 s, q stops, d (or Ctrl-C) detaches and leaves it playing.")

    func run() throws {
        let client: ControlClient
        let status: Status
        do {
            client = try ControlClient.connect()
            status = try client.send(.subscribe(progress: true))
        } catch {
            throw error == .noDaemon ? Console.fail(tr("nothing is playing (no daemon running)", "nichts spielt (kein Daemon aktiv)")) : failure(error)
        }
        guard let session = status.session else { throw Console.fail(tr("nothing is playing", "nichts spielt")) }
        var attachment = Attachment(client: client, session: session, status: status)
        let code = attachment.run()
        if code != 0 { throw ExitCode(code) }
    }
}

/// The write end of a client's readiness pipe, given to a daemon started on demand: only a
/// pipe is written to (a stray number names some other file, or nothing), once, and closed once.
final class ReadyPipe {
    private var fd: Int32

    init?(_ fd: Int32) {
        var st = stat()
        guard fd >= 3, fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFIFO else { return nil }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)   // not handed on to anything the daemon starts
        self.fd = fd
    }

    /// Says `byte` (ReadyByte) and closes the pipe.
    func notify(_ byte: UInt8) {
        guard fd >= 0 else { return }
        var b = byte
        _ = write(fd, &b, 1)
        close()
    }

    func close() {
        guard fd >= 0 else { return }
        _ = Glibc.close(fd)
        fd = -1
    }
}
