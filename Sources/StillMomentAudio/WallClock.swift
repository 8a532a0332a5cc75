// The real-time clock (CLOCK_REALTIME) for instants shared between machines (a ring in
// several rooms), its state as the kernel keeps it (synchronised by chrony or not, and the
// error estimated), and the one conversion of such an instant to the monotonic clock the
// engine plays in.
import CAudio
import Glibc

public enum WallClock {
    /// Now, in nanoseconds since 1970 (UTC).
    public static func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(max(0, ts.tv_sec)) * 1_000_000_000 + UInt64(max(0, ts.tv_nsec))
    }

    /// Now, in milliseconds since 1970.
    public static func milliseconds() -> Int64 { Int64(nanoseconds() / 1_000_000) }

    /// The monotonic moment (MonotonicClock) of the real-time instant `ns`: the two clocks
    /// read together (the closest of three pairs, a real-time read between two monotonic
    /// ones), so the error is that of one system call, not of a preemption.
    public static func monotonic(atRealtime ns: UInt64) -> UInt64 {
        var best: (gap: UInt64, mono: UInt64, real: UInt64) = (.max, 0, 0)
        for _ in 0..<3 {
            let a = MonotonicClock.nanoseconds()
            let r = nanoseconds()
            let b = MonotonicClock.nanoseconds()
            if b - a < best.gap { best = (b - a, a + (b - a) / 2, r) }
        }
        if ns >= best.real { return best.mono &+ (ns - best.real) }
        let back = best.real - ns
        return back < best.mono ? best.mono - back : 0
    }
}

/// The real-time clock's discipline: whether a time daemon keeps it synchronised, and the
/// error it estimates (what a node says in `status` and `rooms`, and what decides whether
/// it rings with other rooms).
public struct ClockState: Sendable, Equatable, Codable {
    public var synchronised: Bool
    /// The estimated error (µs), as the time daemon told the kernel.
    public var estimatedErrorMicroseconds: Int
    /// The maximum error (µs): grows while nothing corrects the clock.
    public var maximumErrorMicroseconds: Int

    public init(synchronised: Bool, estimatedErrorMicroseconds: Int, maximumErrorMicroseconds: Int) {
        self.synchronised = synchronised
        self.estimatedErrorMicroseconds = estimatedErrorMicroseconds
        self.maximumErrorMicroseconds = maximumErrorMicroseconds
    }

    /// The kernel's state now (adjtimex, read only). A test sets `STILLMOMENT_TEST_CLOCK`
    /// in the process environment to `synchronised` or `unsynchronised` (several nodes on
    /// one test machine share its one clock, synchronised or not, so a node's clock is
    /// simulated there); nothing else changes what is read.
    public static func read() -> ClockState {
        if let forced = getenv("STILLMOMENT_TEST_CLOCK").map({ String(cString: $0) }) {
            if forced == "synchronised" { return ClockState(synchronised: true, estimatedErrorMicroseconds: 0, maximumErrorMicroseconds: 0) }
            if forced == "unsynchronised" { return ClockState(synchronised: false, estimatedErrorMicroseconds: 16_000_000, maximumErrorMicroseconds: 16_000_000) }
        }
        var sync: Int32 = 0
        var est = 0, maxError = 0
        guard sm_realtime_clock_state(&sync, &est, &maxError) == 0 else {
            return ClockState(synchronised: false, estimatedErrorMicroseconds: 0, maximumErrorMicroseconds: 0)
        }
        return ClockState(synchronised: sync != 0, estimatedErrorMicroseconds: est, maximumErrorMicroseconds: maxError)
    }

    /// Fit to ring with other rooms: synchronised, with an estimated error within `bound` ms.
    public func fit(boundMilliseconds bound: Int) -> Bool {
        synchronised && estimatedErrorMicroseconds <= bound * 1000
    }
}
