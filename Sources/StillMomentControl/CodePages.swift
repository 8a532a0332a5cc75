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
        return released + releaseReadOnlyData()
    }

    /// The read-only data of the files mapped (a library's symbol tables, which the dynamic
    /// linker reads at start-up and never again, and its constants): the private read-only
    /// file mappings none of whose pages was ever written (smaps' `Anonymous: 0 kB`: no
    /// relocated RELRO page among them, which MADV_DONTNEED would throw away), released as
    /// the code is: each page is the file's, and the next read faults it back from the page
    /// cache. Measured in the daemon playing on PulseAudio: libstdc++'s 740 KB, SQLite's,
    /// libm's and libpulse's libraries' (X11, vorbisenc, systemd, gcrypt …) were resident
    /// for nothing.
    static func releaseReadOnlyData() -> Int {
        guard let f = fopen("/proc/self/smaps", "r") else { return 0 }
        var candidates: [(lo: UInt, hi: UInt)] = []
        var current: (lo: UInt, hi: UInt)?
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, Int32(line.count), f) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let fields = text.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = fields.first else { continue }
            if first.hasSuffix(":") {
                // A field of the mapping above: keep it only if none of its pages is anonymous.
                if first == "Anonymous:", let range = current {
                    if fields.count >= 2, fields[1] == "0" { candidates.append(range) }
                    current = nil
                }
                continue
            }
            // A mapping's header: address perms offset dev inode path.
            current = nil
            guard fields.count >= 6, fields[1] == "r--p", fields[5].hasPrefix("/") else { continue }
            let range = first.split(separator: "-")
            guard range.count == 2, let lo = UInt(range[0], radix: 16), let hi = UInt(range[1], radix: 16), hi > lo else { continue }
            current = (lo, hi)
        }
        fclose(f)
        var released = 0
        for range in candidates {
            guard let start = UnsafeMutableRawPointer(bitPattern: range.lo) else { continue }
            if madvise(start, Int(range.hi - range.lo), MADV_DONTNEED) == 0 { released += Int(range.hi - range.lo) }
        }
        return released
    }
}
