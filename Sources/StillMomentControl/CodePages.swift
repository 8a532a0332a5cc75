// The code pages a process maps but no longer runs: start-up (argument parsing, the
// store's migrations check, the runtime's first lookups) touches megabytes of the static
// binary's text that serving never uses again, and the kernel maps neighbouring pages of
// each fault too. Dropping the executable mappings' page-table entries (MADV_DONTNEED on
// read-only, executable file mappings only: their pages are never written, the page cache
// keeps the file, the next use faults them back in) leaves the web app's RSS at what it
// actually uses. The web app does it once serving begins and whenever the last browser has
// gone; the daemon when it has been idle (no session) for 2 s, and once 3 s into each
// session, when the session's start-up work is over. The threads that play then fault
// back in the few pages of code they run: minor faults from the page cache, microseconds
// each, once, against the output thread's 20-ms periods and the render thread's second of
// ring (nothing is locked in memory anyway: the kernel may drop these pages under pressure
// at any time).
import Glibc

public enum CodePages {
    /// Releases the executable file mappings' pages from this process; returns how many bytes were mapped.
    @discardableResult
    public static func release() -> Int {
        guard let f = fopen("/proc/self/maps", "r") else { return 0 }
        defer { fclose(f) }
        var released = 0
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, Int32(line.count), f) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let fields = text.split(separator: " ", omittingEmptySubsequences: true)
            // address perms offset dev inode path: an executable, read-only, private mapping of a file.
            guard fields.count >= 6, fields[1] == "r-xp", fields[5].hasPrefix("/") else { continue }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let lo = UInt(range[0], radix: 16), let hi = UInt(range[1], radix: 16), hi > lo,
                  let start = UnsafeMutableRawPointer(bitPattern: lo) else { continue }
            if madvise(start, Int(hi - lo), MADV_DONTNEED) == 0 { released += Int(hi - lo) }
        }
        return released
    }
}
