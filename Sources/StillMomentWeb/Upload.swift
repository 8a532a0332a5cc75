// An upload on its way into the store: streamed to a private file (0600, in a 0700 folder
// of the store's home that the importer's own copy never sees half-written), imported
// from there, and removed whatever happens. The file is held with flock from its creation
// until it is removed (through the import), so a web app starting beside a live one
// tells a crash's leftover (no lock) from an upload in flight (locked) at once.
import FoundationEssentials
import Glibc
import StillMomentCore

public final class Upload: @unchecked Sendable {
    public let path: String
    /// The file's name as the browser gave it.
    public let name: String
    /// Open (and flock'd) until `discard`; written to until `finish`.
    private var fd: Int32
    private var writing = true
    public private(set) var received = 0

    /// The folder the uploads go to; what a crash left there is removed when a server starts.
    public static func folder(home: String) -> String { home + "/.web-uploads" }

    /// Removes what a crash (or SIGKILL) left: every entry but a folder that no live process
    /// holds with flock (a live upload of another web app is locked, and stays).
    public static func cleanFolder(home: String) {
        let folder = folder(home: home)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        for n in names {
            let path = folder + "/" + n
            var st = stat()
            guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) != S_IFDIR else { continue }
            if (st.st_mode & S_IFMT) == S_IFREG {
                let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
                guard fd >= 0 else { continue }
                defer { close(fd) }
                guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { continue }
            }
            unlink(path)
        }
    }

    init(home: String, name: String) throws(WebError) {
        let folder = Self.folder(home: home)
        if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw WebError.io("\(folder): \(String(cString: strerror(errno)))") }
        var st = stat()
        guard lstat(folder, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, st.st_uid == getuid() else {
            throw WebError.io(tr("\(folder) is not a folder of this user", "\(folder) ist kein Ordner dieses Benutzers"))
        }
        self.name = name
        let ext = name.lowercased().hasSuffix(".m4a") || name.lowercased().hasSuffix(".mp4") ? "m4a" : "mp3"
        var rng = SystemRandomNumberGenerator()
        var made: (String, Int32)?
        // A starting web app may unlink the new file between its open and its flock: then
        // the path no longer names this file, and another name is tried.
        for _ in 0..<4 where made == nil {
            let path = folder + "/upload-\(String(rng.next(), radix: 16)).\(ext)"
            let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw WebError.io("\(path): \(String(cString: strerror(errno)))") }
            var mine = stat(), named = stat()
            if flock(fd, LOCK_EX | LOCK_NB) == 0, fstat(fd, &mine) == 0, lstat(path, &named) == 0,
               mine.st_ino == named.st_ino, mine.st_dev == named.st_dev {
                made = (path, fd)
            } else {
                close(fd)
            }
        }
        guard let (path, fd) = made else { throw WebError.io(tr("\(folder): cannot hold an upload file", "\(folder): keine Datei zum Hochladen zu halten")) }
        self.path = path
        self.fd = fd
    }

    deinit { discard() }

    func append(_ bytes: ArraySlice<UInt8>) throws(WebError) {
        guard fd >= 0, writing else { return }
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { raw in write(fd, raw.baseAddress.map { $0 + done }, raw.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw WebError.io(errno == ENOSPC ? tr("the disk is full", "der Datenträger ist voll") : String(cString: strerror(errno)))
            }
            done += n
        }
        received += bytes.count
    }

    /// The upload is all there: nothing more is written (the file stays open and locked
    /// while the importer reads it).
    func finish() { writing = false }

    /// Removes the file (an aborted, refused or imported upload), then lets its lock go.
    public func discard() {
        writing = false
        guard fd >= 0 else { return }
        unlink(path)
        close(fd)
        fd = -1
    }
}
