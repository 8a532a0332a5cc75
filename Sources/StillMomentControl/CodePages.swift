// The pages of code and read-only data a process maps but no longer uses: start-up
// (argument parsing, the store's migrations check, the runtime's first lookups, the dynamic
// linker reading the libraries' symbol tables) touches megabytes of the static binary's text
// and of the libraries that serving never uses again, and the kernel maps neighbouring pages
// of each fault too. Dropping them from this process (MADV_DONTNEED on the loaded ELF
// objects' segments that are never written: their pages are the file's, the page cache
// keeps it, the next use faults them back in; sm_release_file_pages in CSystem/pages.c
// says which pages and why) leaves the RSS at what the process actually uses. The web app
// does it once serving begins and whenever the last browser has gone; the daemon when it
// has been idle (no session) for 2 s, and once 3 s into each session, when the session's
// start-up work is over. The threads that play then fault back in the few pages they run:
// minor faults from the page cache, microseconds each, once, against the output thread's
// 20-ms periods and the render thread's second of ring (nothing is locked in memory
// anyway: the kernel may drop these pages under pressure at any time).
import CSystem

public enum CodePages {
    /// Releases the pages of the loaded objects' code and read-only data from this process;
    /// returns how many bytes were released.
    @discardableResult
    public static func release() -> Int { Int(sm_release_file_pages()) }
}
