// The clock the engine's position is kept in (CLOCK_MONOTONIC, as the output thread's):
// a moment stamped with it can be asked of the engine later (AudioEngine.position(heardAt:)).
import Glibc

public enum MonotonicClock {
    /// Now, in nanoseconds since boot.
    public static func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
