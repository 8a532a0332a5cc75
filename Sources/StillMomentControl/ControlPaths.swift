// Where the control socket lives, whether the one found there may be trusted (folder,
// socket and peer all our own), and the one-line errors between a client and the daemon.
import CSystem
import FoundationEssentials
import Glibc
import StillMomentCore

/// Where the control socket lives: `$XDG_RUNTIME_DIR/stillmoment/control.sock`, else
/// `/tmp/stillmoment-$UID/control.sock`; the folder is the user's own, mode 0700.
/// The system service (dist/debian) runs with `XDG_RUNTIME_DIR=/run` and
/// `STILLMOMENT_CONTROL_GROUP`: its folder, `/run/stillmoment`, is 0750 and its socket
/// 0660, both of that group, whose members it serves besides its own user.
public enum ControlPaths {
    /// The system service's folder: systemd makes it (`RuntimeDirectory=`) in /run, where
    /// only root may make anything. A client looks there after its own places.
    public static let systemFolder = "/run/stillmoment"

    /// `$STILLMOMENT_CONTROL_GROUP`, the group whose members may control this daemon
    /// besides its own user: nil when unset (the default: its own user only).
    public static func controlGroup() throws(ControlError) -> gid_t? {
        guard let name = Environment.value("STILLMOMENT_CONTROL_GROUP"), !name.isEmpty else { return nil }
        guard let group = getgrnam(name) else {
            throw ControlError.io("STILLMOMENT_CONTROL_GROUP: there is no group named \(ControlError.oneLine(name))")
        }
        return group.pointee.gr_gid
    }

    /// Whether a peer (its uid, and its gid as it connected, from SO_PEERCRED) may control
    /// this daemon: our own uid; or, with a control group, a peer whose gid is that group,
    /// or whose user has it as its primary group or is in its member list (read from the
    /// group database at each connection: a user removed from the group is refused at once).
    static func mayControl(uid: uid_t, gid: gid_t, group: gid_t?) -> Bool {
        if uid == geteuid() { return true }
        guard let group else { return false }
        if gid == group { return true }
        guard let pw = getpwuid(uid) else { return false }
        if pw.pointee.pw_gid == group { return true }
        let name = String(cString: pw.pointee.pw_name)
        guard let gr = getgrgid(group), var member = gr.pointee.gr_mem else { return false }
        while let m = member.pointee {
            if String(cString: m) == name { return true }
            member += 1
        }
        return false
    }

    /// Opens the socket just bound to the control group (0660, that group); nothing without one.
    static func shareWithGroup(_ socketPath: String) throws(ControlError) {
        guard let group = try controlGroup() else { return }
        if chown(socketPath, uid_t.max, group) != 0 || chmod(socketPath, 0o660) != 0 {
            throw ControlError.io("cannot open \(socketPath) to group \(group): \(String(cString: strerror(errno)))")
        }
    }

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
        for other in [systemd, tmp, systemFolder] where !list.contains(other) { list.append(other) }
        return list.map { $0 + "/control.sock" }
    }
    static var lock: String { folder + "/daemon.lock" }

    /// Creates the folder (0700) if needed and checks that it is a real folder of ours
    /// that nobody else can enter (in /tmp another user could have made it first). With a
    /// control group, the folder is 0750 and of that group: its members may enter it.
    public static func prepareFolder() throws(ControlError) {
        let path = folder
        let group = try controlGroup()
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw ControlError.io("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        var st = stat()
        guard lstat(path, &st) == 0 else { throw ControlError.io("\(path): \(String(cString: strerror(errno)))") }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { throw ControlError.io("\(path) is not a folder; remove it") }
        guard st.st_uid == geteuid() else {
            throw ControlError.io("\(path) belongs to another user; remove it or set XDG_RUNTIME_DIR")
        }
        if let group {
            if st.st_gid != group, chown(path, uid_t.max, group) != 0 {
                throw ControlError.io("cannot give \(path) to group \(group): \(String(cString: strerror(errno)))")
            }
            if st.st_mode & 0o777 != 0o750, chmod(path, 0o750) != 0 {
                throw ControlError.io("cannot make \(path) mode 0750: \(String(cString: strerror(errno)))")
            }
        } else if st.st_mode & 0o077 != 0, chmod(path, 0o700) != 0 {
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
        if folder == systemFolder { return distrustSystem(st, socket: socket, german: de) }
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

    /// The system service's folder: whoever owns it (systemd made it for the service's
    /// user), as long as /run is root's and closed to others, the folder is writable by
    /// its owner only, and the socket is a socket of the folder's owner.
    static func distrustSystem(_ st: stat, socket: stat?, german de: Bool) -> ControlError? {
        let folder = systemFolder
        func refuse(_ what: String) -> ControlError {
            .untrusted(de ? "\(folder) \(what): keine Verbindung zum Systemdienst dort"
                          : "\(folder) \(what): refusing to talk to a system service there")
        }
        var parent = stat()
        guard lstat("/run", &parent) == 0, (parent.st_mode & S_IFMT) == S_IFDIR, parent.st_uid == 0, parent.st_mode & 0o022 == 0 else {
            return refuse(de ? "liegt in einem /run, das nicht root allein gehört" : "is in a /run that is not root's alone")
        }
        guard st.st_mode & 0o022 == 0 else {
            return refuse(de ? "ist für andere beschreibbar (Modus \(String(st.st_mode & 0o777, radix: 8)))" : "is writable by others (mode \(String(st.st_mode & 0o777, radix: 8)))")
        }
        guard let socket else { return nil }
        guard (socket.st_mode & S_IFMT) == S_IFSOCK, socket.st_uid == st.st_uid else {
            return refuse(de ? "enthält einen control.sock, der nicht dem Besitzer des Ordners gehört" : "holds a control.sock that is not its owner's")
        }
        return nil
    }

    /// Connects to the socket only if it is trusted, and only to a peer of our own uid
    /// (in the system service's folder: of the folder's owner, the service's user).
    /// Returns the fd and the peer's pid (from the kernel, not from what it says), or
    /// -errno when nothing answers there.
    static func connectTrusted(_ socketPath: String, timeoutMs: Int32 = 5000) throws(ControlError) -> (fd: Int32, pid: pid_t) {
        if let refusal = distrust(socketPath) { throw refusal }
        let fd = sm_unix_connect(socketPath, timeoutMs)
        guard fd >= 0 else { return (fd, 0) }
        var uid: uid_t = 0
        var pid: pid_t = 0
        var expected = geteuid()
        if socketPath == systemFolder + "/control.sock" {
            var st = stat()
            guard lstat(systemFolder, &st) == 0 else { close(fd); return (-ENOENT, 0) }
            expected = st.st_uid
        }
        guard sm_peer_credentials(fd, &uid, &pid) == 0, uid == expected else {
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
    /// from a newer daemon, reads as `failed`) and its words, in both languages from a
    /// version 3 daemon (else the one it answered in), shown in the language of whoever
    /// shows them (the CLI's user, the browser the web app answers).
    case refused(code: ErrorCode, words: LocalizedText)
    /// Another daemon holds the lock (its pid, as its lock file says).
    case alreadyRunning(pid: String)
    /// The connection closed or a reply could not be read.
    case lost(String)
    /// The socket or its folder belongs to someone else: nothing was sent.
    case untrusted(String)

    public var description: String { Self.oneLine(text) }

    /// A daemon's refusal, its code and message cleaned of control characters here (they
    /// are printed as they are by whoever catches the error).
    static func refusal(code: String, words: LocalizedText) -> ControlError {
        .refused(code: ErrorCode(rawValue: code) ?? .failed, words: words.map(oneLine))
    }

    /// A daemon's error answer (`{"code", "message", "words": {"en", "de"}}`) as this error.
    public static func refusal(_ error: JSON) -> ControlError {
        let message = error["message"]?.string ?? "refused"
        let words = error["words"]?.decoded(as: LocalizedText.self) ?? .same(message)
        return refusal(code: error["code"]?.string ?? "failed", words: words)
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
        case .refused(_, let words): return words.text()
        case .alreadyRunning(let pid):
            return tr("a stillmoment daemon is running already (pid \(Self.oneLine(pid)))",
                      "ein stillmoment-Daemon läuft schon (PID \(Self.oneLine(pid)))")
        }
    }
}
