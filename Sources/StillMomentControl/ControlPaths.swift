// Where the control socket lives, whether the one found there may be trusted (folder,
// socket and peer all our own), and the one-line errors between a client and the daemon.
import CSystem
import FoundationEssentials
import Glibc
import StillMomentCore

/// Where the control socket lives: `$XDG_RUNTIME_DIR/stillmoment/control.sock`, else
/// `/tmp/stillmoment-$UID/control.sock`; the folder is the user's own, mode 0700.
public enum ControlPaths {
    public static var folder: String {
        if let runtime = Environment.value("XDG_RUNTIME_DIR") { return runtime + "/stillmoment" }
        // cron leaves XDG_RUNTIME_DIR unset, but systemd's folder for this user
        // (where the service's daemon listens) may well exist.
        let systemd = "/run/user/\(getuid())"
        var st = stat()
        if lstat(systemd, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, st.st_uid == getuid() {
            return systemd + "/stillmoment"
        }
        return "/tmp/stillmoment-\(getuid())"
    }

    public static var socket: String { folder + "/control.sock" }

    /// Where a daemon may be listening, this environment's place first: a daemon started
    /// from cron (no XDG_RUNTIME_DIR, no login) listens in /tmp, one started from a login
    /// shell in /run/user; a client looks in both before it starts another.
    static var socketCandidates: [String] {
        var list = [folder]
        let systemd = "/run/user/\(getuid())/stillmoment"
        let tmp = "/tmp/stillmoment-\(getuid())"
        for other in [systemd, tmp] where !list.contains(other) { list.append(other) }
        return list.map { $0 + "/control.sock" }
    }
    static var lock: String { folder + "/daemon.lock" }

    /// Creates the folder (0700) if needed and checks that it is a real folder of ours
    /// that nobody else can enter (in /tmp another user could have made it first).
    public static func prepareFolder() throws(ControlError) {
        let path = folder
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw ControlError.io("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        var st = stat()
        guard lstat(path, &st) == 0 else { throw ControlError.io("\(path): \(String(cString: strerror(errno)))") }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { throw ControlError.io("\(path) is not a folder; remove it") }
        guard st.st_uid == geteuid() else {
            throw ControlError.io("\(path) belongs to another user; remove it or set XDG_RUNTIME_DIR")
        }
        if st.st_mode & 0o077 != 0, chmod(path, 0o700) != 0 {
            throw ControlError.io("cannot make \(path) private: \(String(cString: strerror(errno)))")
        }
    }
}

extension ControlPaths {
    /// Whether a daemon at `socketPath` may be trusted, checked before anything is sent:
    /// its folder is a real folder (not a link) of ours that no other user can enter
    /// (mode 0700 or stricter), and the socket is a socket of ours. nil when there is
    /// nothing there; else the refusal, one line that names the folder and what to do.
    static func distrust(_ socketPath: String) -> ControlError? {
        let folder = String(socketPath[..<(socketPath.lastIndex(of: "/") ?? socketPath.startIndex)])
        var st = stat()
        guard lstat(folder, &st) == 0 else { return nil }
        var socket = stat()
        let hasSocket = lstat(socketPath, &socket) == 0
        return distrust(folder: folder, st, socket: hasSocket ? socket : nil, me: geteuid(), german: Language.current == .de)
    }

    /// The check itself, on what `lstat` said of the folder and of the socket (nil: none).
    static func distrust(folder: String, _ st: stat, socket: stat?, me: uid_t, german de: Bool) -> ControlError? {
        let remove = de ? "entferne den Ordner oder setze XDG_RUNTIME_DIR auf einen eigenen"
                        : "remove it, or set XDG_RUNTIME_DIR to a folder of your own"
        func refuse(_ what: String, _ todo: String) -> ControlError {
            .untrusted(de ? "\(folder) \(what): keine Verbindung zu einem Daemon dort; \(todo)"
                          : "\(folder) \(what): refusing to talk to a daemon there; \(todo)")
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return refuse(de ? "ist kein Ordner" : "is not a folder", remove) }
        guard st.st_uid == me else {
            return refuse(de ? "gehört einem anderen Benutzer (uid \(st.st_uid))" : "belongs to another user (uid \(st.st_uid))", remove)
        }
        let mode = String(st.st_mode & 0o777, radix: 8)
        guard st.st_mode & 0o077 == 0 else {
            let todo = de ? "mach ihn privat (chmod 700 \(folder)) oder entferne ihn" : "make it private (chmod 700 \(folder)) or remove it"
            return refuse(de ? "ist für andere zugänglich (Modus \(mode))" : "is open to other users (mode \(mode))", todo)
        }
        guard let socket else { return nil }
        guard (socket.st_mode & S_IFMT) == S_IFSOCK, socket.st_uid == me else {
            let todo = de ? "entferne \(folder)/control.sock" : "remove \(folder)/control.sock"
            return refuse(de ? "enthält einen control.sock, der nicht uns gehört" : "holds a control.sock that is not ours", todo)
        }
        return nil
    }

    /// Connects to the socket only if it is trusted, and only to a peer of our own uid.
    /// Returns the fd and the peer's pid (from the kernel, not from what it says), or
    /// -errno when nothing answers there.
    static func connectTrusted(_ socketPath: String, timeoutMs: Int32 = 5000) throws(ControlError) -> (fd: Int32, pid: pid_t) {
        if let refusal = distrust(socketPath) { throw refusal }
        let fd = sm_unix_connect(socketPath, timeoutMs)
        guard fd >= 0 else { return (fd, 0) }
        var uid: uid_t = 0
        var pid: pid_t = 0
        guard sm_peer_credentials(fd, &uid, &pid) == 0, uid == geteuid() else {
            close(fd)
            let folder = String(socketPath[..<(socketPath.lastIndex(of: "/") ?? socketPath.startIndex)])
            throw ControlError.untrusted(Language.current == .de
                ? "\(socketPath) wird vom Prozess eines anderen Benutzers bedient (uid \(uid), pid \(pid)): keine Verbindung; beende ihn oder setze XDG_RUNTIME_DIR auf einen eigenen Ordner statt \(folder)"
                : "\(socketPath) is served by another user's process (uid \(uid), pid \(pid)): refusing to talk to it; stop that process, or set XDG_RUNTIME_DIR to a folder of your own instead of \(folder)")
        }
        return (fd, pid)
    }
}

/// What can go wrong between a client and the daemon, as one line each. A description
/// never carries a control character (a daemon's message, a path from the environment
/// could): C0, DEL, C1 (so ESC and CSI too) are dropped, line breaks become spaces.
public enum ControlError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No daemon answers at the socket.
    case noDaemon
    case io(String)
    /// The daemon refused a request: its error code (a code this client does not know,
    /// from a newer daemon, reads as `failed`) and message.
    case refused(code: ErrorCode, message: String)
    /// Another daemon holds the lock (its pid, as its lock file says).
    case alreadyRunning(pid: String)
    /// The connection closed or a reply could not be read.
    case lost(String)
    /// The socket or its folder belongs to someone else: nothing was sent.
    case untrusted(String)

    public var description: String { Self.oneLine(text) }

    /// A daemon's refusal, its code and message cleaned of control characters here (they
    /// are printed as they are by whoever catches the error).
    static func refusal(code: String, message: String) -> ControlError {
        .refused(code: ErrorCode(rawValue: code) ?? .failed, message: oneLine(message))
    }

    /// The text without control characters, on one line (tabs become spaces too).
    static func oneLine(_ text: String) -> String {
        String(Display.clean(text).map { $0 == "\t" ? " " : $0 })
    }

    private var text: String {
        switch self {
        case .noDaemon: return "no stillmoment daemon is running (nothing is playing)"
        case .io(let m), .untrusted(let m): return m
        case .lost(let m):
            // What to do: the daemon's own log says why it went away or stopped answering.
            return "\(m); its log is \(Paths.home)/daemon.log (or `journalctl --user -u stillmoment` under systemd)"
        case .refused(_, let message): return message
        case .alreadyRunning(let pid):
            return tr("a stillmoment daemon is running already (pid \(Self.oneLine(pid)))",
                      "ein stillmoment-Daemon läuft schon (PID \(Self.oneLine(pid)))")
        }
    }
}
