/// CodePages: what the daemon and the web app hand back once their start-up is over. The
/// pages must come back on their next use (this test process goes on running every other
/// suite, on other threads, after it), and only pages of files that were never written go.
import Glibc
import Testing
@testable import StillMomentControl

@Suite("Code pages")
struct CodePagesTests {
    /// Resident kB of this process's private read-only file mappings: (with no written page, with some).
    static func readOnlyResident() -> (clean: Int, written: Int) {
        guard let f = fopen("/proc/self/smaps", "r") else { return (0, 0) }
        defer { fclose(f) }
        var clean = 0, written = 0, inRange = false, rss = 0
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, Int32(line.count), f) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let fields = text.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = fields.first, fields.count >= 2 else { continue }
            if !first.hasSuffix(":") {
                inRange = fields.count >= 6 && fields[1] == "r--p" && fields[5].hasPrefix("/")
            } else if inRange, first == "Rss:" {
                rss = Int(fields[1]) ?? 0
            } else if inRange, first == "Anonymous:" {
                if fields[1] == "0" { clean += rss } else { written += rss }
            }
        }
        return (clean, written)
    }

    @Test("read-only data never written is handed back and comes back when read; relocated pages stay")
    func readOnlyData() throws {
        let before = Self.readOnlyResident()
        #expect(before.clean > 64, "\(before.clean) kB of clean read-only file pages to begin with")
        let released = CodePages.releaseReadOnlyData()
        let after = Self.readOnlyResident()
        #expect(released > 0)
        #expect(after.clean < before.clean / 2, "\(before.clean) kB -> \(after.clean) kB")
        #expect(after.written >= before.written, "relocated pages kept: \(before.written) kB -> \(after.written) kB")
        // What was handed back reads as before: libc's and libm's constants, the runtime's tables.
        #expect(String(cString: strerror(ENOENT)) == "No such file or directory")
        #expect(abs(sin(1.0) - 0.8414709848078965) < 1e-15)
        #expect([3, 1, 2].sorted().map { "\($0)" }.joined(separator: ",") == "1,2,3")
        #expect(CodePages.release() > 0, "the code too, then everything again")
    }
}
