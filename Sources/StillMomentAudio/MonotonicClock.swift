// The clock the engine's position is kept in (CLOCK_MONOTONIC, as the output thread's):
// a moment stamped with it can be asked of the engine later (AudioEngine.position(heardAt:)).
// The one reading of it in Swift: the daemon's timeouts, the scheduler's and the web
// server's waits, the CLI's periodic work.
import Glibc

public enum MonotonicClock {
    /// Now, in nanoseconds since boot.
    public static func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Now, in whole milliseconds since boot.
    public static func milliseconds() -> Int64 { Int64(nanoseconds() / 1_000_000) }

    /// Now, in seconds since boot.
    public static func seconds() -> Double { Double(nanoseconds()) / 1e9 }
}
