import CSystem
import FoundationEssentials
import Glibc
import StillMomentCore

/// Where the control socket lives: `$XDG_RUNTIME_DIR/stillmoment/control.sock`, else
/// `/tmp/stillmoment-$UID/control.sock`; the folder is the user's own, mode 0700.
public enum ControlPaths {
    public static var folder: String {
        let env = ProcessInfo.processInfo.environment
        if let runtime = env["XDG_RUNTIME_DIR"], !runtime.isEmpty { return runtime + "/stillmoment" }
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
    /// its folder is a real folder of ours that nobody else can write, and the socket is
    /// a socket of ours. nil when there is nothing there; else the refusal.
    static func distrust(_ socketPath: String) -> ControlError? {
        let folder = String(socketPath[..<(socketPath.lastIndex(of: "/") ?? socketPath.startIndex)])
        let me = geteuid()
        var st = stat()
        guard lstat(folder, &st) == 0 else { return nil }
        let de = Language.current == .de
        func refuse(_ what: String) -> ControlError {
            .untrusted(de ? "\(folder) \(what): keine Verbindung zu einem Daemon dort; entferne den Ordner oder setze XDG_RUNTIME_DIR auf einen eigenen"
                          : "\(folder) \(what): refusing to talk to a daemon there; remove it, or set XDG_RUNTIME_DIR to a folder of your own")
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return refuse(de ? "ist kein Ordner" : "is not a folder") }
        guard st.st_uid == me else { return refuse(de ? "gehört einem anderen Benutzer (uid \(st.st_uid))" : "belongs to another user (uid \(st.st_uid))") }
        guard st.st_mode & 0o022 == 0 else { return refuse(de ? "ist für andere beschreibbar" : "is writable by others") }
        guard lstat(socketPath, &st) == 0 else { return nil }
        guard (st.st_mode & S_IFMT) == S_IFSOCK, st.st_uid == me else {
            return refuse(de ? "enthält einen fremden control.sock" : "holds a control.sock that is not ours")
        }
        return nil
    }

    /// Connects to the socket only if it is trusted, and only to a peer of our own uid.
    /// Returns the fd, or -errno when nothing answers there.
    static func connectTrusted(_ socketPath: String, timeoutMs: Int32 = 5000) throws(ControlError) -> Int32 {
        if let refusal = distrust(socketPath) { throw refusal }
        let fd = sm_unix_connect(socketPath, timeoutMs)
        guard fd >= 0 else { return fd }
        var uid: uid_t = 0
        var pid: pid_t = 0
        guard sm_peer_credentials(fd, &uid, &pid) == 0, uid == geteuid() else {
            close(fd)
            throw ControlError.untrusted("\(socketPath) is served by another user's process (uid \(uid), pid \(pid)): refusing to talk to it")
        }
        return fd
    }
}

/// What can go wrong between a client and the daemon, as one line each.
public enum ControlError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No daemon answers at the socket.
    case noDaemon
    case io(String)
    /// The daemon refused a request: its error code and message.
    case refused(code: String, message: String)
    /// The connection closed or a reply could not be read.
    case lost(String)
    /// The socket or its folder belongs to someone else: nothing was sent.
    case untrusted(String)

    public var description: String {
        switch self {
        case .noDaemon: return "no stillmoment daemon is running (nothing is playing)"
        case .io(let m), .untrusted(let m): return m
        case .lost(let m):
            // What to do: the daemon's own log says why it went away or stopped answering.
            return "\(m); its log is \(Paths.home)/daemon.log (or `journalctl --user -u stillmoment` under systemd)"
        case .refused(_, let message): return message
        }
    }
}
