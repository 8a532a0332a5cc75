/// CodePages: what the daemon and the web app hand back once their start-up is over. The
/// pages must come back on their next use (this test process goes on running every other
/// suite, on other threads, after it), and only pages no one ever wrote may go.
import Glibc
import Testing
@testable import StillMomentControl

@Suite("Code pages")
struct CodePagesTests {
    /// Resident kB of this process's private file mappings that are not writable: (never
    /// written, written once: a library's relocated RELRO).
    static func readOnlyResident() -> (clean: Int, written: Int) {
        guard let f = fopen("/proc/self/smaps", "r") else { return (0, 0) }
        defer { fclose(f) }
        var clean = 0, written = 0, inRange = false, rss = 0
        var line = [CChar](repeating: 0, count: 8192)
        while fgets(&line, Int32(line.count), f) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let fields = text.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = fields.first, fields.count >= 2 else { continue }
            if !first.hasSuffix(":") {
                inRange = fields.count >= 6 && (fields[1] == "r--p" || fields[1] == "r-xp") && fields[5].hasPrefix("/")
            } else if inRange, first == "Rss:" {
                rss = Int(fields[1]) ?? 0
            } else if inRange, first == "Anonymous:" {
                if fields[1] == "0" { clean += rss } else { written += rss }
            }
        }
        return (clean, written)
    }

    @Test("code and read-only data are handed back and come back when used; relocated and written pages stay")
    func release() throws {
        // A private file mapping written, then made read-only: not an ELF segment, never touched.
        let path = "/tmp/stillmoment-codepages-\(getpid())"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o600)
        try #require(fd >= 0)
        defer { close(fd); unlink(path) }
        #expect(ftruncate(fd, 4096) == 0)
        let map = try #require(mmap(nil, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0))
        try #require(map != MAP_FAILED)
        defer { munmap(map, 4096) }
        map.storeBytes(of: 0x5EED_F00D, as: UInt32.self)
        #expect(mprotect(map, 4096, PROT_READ) == 0)

        let before = Self.readOnlyResident()
        #expect(before.clean > 1024, "\(before.clean) kB of clean code and read-only data to begin with")
        let released = CodePages.release()
        let after = Self.readOnlyResident()
        #expect(released > 1 << 20, "\(released) bytes released")
        #expect(after.clean < before.clean, "\(before.clean) kB -> \(after.clean) kB")
        #expect(after.written >= before.written, "relocated pages kept: \(before.written) kB -> \(after.written) kB")
        #expect(map.load(as: UInt32.self) == 0x5EED_F00D, "a written private page is kept")
        // What was handed back reads as before: libc's and libm's constants, the runtime's tables.
        #expect(String(cString: strerror(ENOENT)) == "No such file or directory")
        #expect(abs(sin(1.0) - 0.8414709848078965) < 1e-15)
        #expect([3, 1, 2].sorted().map { "\($0)" }.joined(separator: ",") == "1,2,3")
    }
}
