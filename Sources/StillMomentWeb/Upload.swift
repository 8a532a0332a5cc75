// An upload on its way into the store: streamed to a private file (0600, in a 0700 folder
// of the store's home that the importer's own copy never sees half-written), imported
// from there, and removed whatever happens.
import FoundationEssentials
import Glibc
import StillMomentCore

public final class Upload: @unchecked Sendable {
    public let path: String
    /// The file's name as the browser gave it.
    public let name: String
    private var fd: Int32
    public private(set) var received = 0

    /// The folder the uploads go to; what a crash left there is removed when a server starts.
    public static func folder(home: String) -> String { home + "/.web-uploads" }

    /// Removes what a crash left: uploads not written to for a minute (one in flight is
    /// written at least every 30 s, or dropped, so another web app's upload is safe).
    public static func cleanFolder(home: String) {
        let folder = folder(home: home)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        for n in names where n.hasPrefix("upload-") {
            var st = stat()
            let path = folder + "/" + n
            guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, now.tv_sec - st.st_mtim.tv_sec > 60 else { continue }
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
        var rng = SystemRandomNumberGenerator()
        let ext = name.lowercased().hasSuffix(".m4a") || name.lowercased().hasSuffix(".mp4") ? "m4a" : "mp3"
        path = folder + "/upload-\(String(rng.next(), radix: 16)).\(ext)"
        self.name = name
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw WebError.io("\(path): \(String(cString: strerror(errno)))") }
    }

    deinit { discard() }

    func append(_ bytes: ArraySlice<UInt8>) throws(WebError) {
        guard fd >= 0 else { return }
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

    /// The upload is all there: the file is closed for the importer.
    func finish() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    /// Removes the file (an aborted, refused or imported upload).
    public func discard() {
        finish()
        unlink(path)
    }
}
