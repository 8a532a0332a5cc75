import Glibc

/// A read-only file opened with O_CLOEXEC and read with pread. Checks that the path is a
/// regular file first, so a folder, a FIFO or a dangling link is a clear error, never a
/// hang.
public final class AudioFile: @unchecked Sendable {
    // @unchecked: the descriptor is immutable after init and pread is thread-safe.
    public let path: String
    public let fd: Int32
    public let size: UInt64

    public init(path: String) throws(AudioError) {
        self.path = path
        var st = stat()
        if lstat(path, &st) != 0 {
            if errno == ENOENT { throw AudioError.fileNotFound(path: path) }
            throw AudioError.unreadable(path: path, reason: Self.errnoText())
        }
        if (st.st_mode & S_IFMT) == S_IFLNK {
            var target = stat()
            if stat(path, &target) != 0 {
                throw AudioError.notARegularFile(path: path, kind: "dangling symbolic link")
            }
            st = target
        }
        switch st.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw AudioError.notARegularFile(path: path, kind: "folder")
        case S_IFIFO: throw AudioError.notARegularFile(path: path, kind: "FIFO (named pipe)")
        case S_IFSOCK: throw AudioError.notARegularFile(path: path, kind: "socket")
        case S_IFCHR, S_IFBLK: throw AudioError.notARegularFile(path: path, kind: "device")
        default: throw AudioError.notARegularFile(path: path, kind: "special file")
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        let fd2 = fd >= 0 ? fd : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd2 >= 0 else { throw AudioError.unreadable(path: path, reason: Self.errnoText()) }
        // O_NONBLOCK only guarded the open against a FIFO swapped in; reads block normally.
        _ = fcntl(fd2, F_SETFL, 0)
        var st2 = stat()
        guard fstat(fd2, &st2) == 0, (st2.st_mode & S_IFMT) == S_IFREG else {
            close(fd2)
            throw AudioError.notARegularFile(path: path, kind: "special file")
        }
        self.fd = fd2
        self.size = UInt64(st2.st_size)
    }

    deinit { close(fd) }

    /// Reads up to `count` bytes at `offset`; fewer only at the end of the file.
    public func read(at offset: UInt64, count: Int) throws(AudioError) -> [UInt8] {
        guard count > 0 else { return [] }
        var result = [UInt8](repeating: 0, count: count)
        let done = try result.withStorage { (buf) throws(AudioError) -> Int in
            try read(at: offset, into: UnsafeMutableRawBufferPointer(buf))
        }
        if done < count { result.removeLast(count - done) }
        return result
    }

    /// Reads into a caller's buffer; returns the bytes read (fewer only at the end).
    public func read(at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(AudioError) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        while done < buffer.count {
            let n = pread(fd, base + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw AudioError.unreadable(path: path, reason: Self.errnoText())
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }
}
