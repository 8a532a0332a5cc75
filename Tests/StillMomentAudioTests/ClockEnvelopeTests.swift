// The engine clock's estimate from a card pointer that moves in steps (sm_clock_envelope_step,
// clock.c): the upper envelope of the reads, as the output thread takes them.
import CAudio
import Testing

@Suite("Clock envelope")
struct ClockEnvelopeTests {
    static let rate: UInt64 = 44100
    static let tickNs: UInt64 = 4_000_000        // snd-aloop's pointer: the kernel's tick at HZ=250
    static let periodFrames: UInt64 = 882        // the output's 20-ms period

    /// The frames a card has played at `ns` (from 0), and what its pointer says then: the
    /// frames at its last step.
    static func played(_ ns: UInt64) -> UInt64 { ns * rate / 1_000_000_000 }
    static func pointer(_ ns: UInt64) -> UInt64 { played(ns / tickNs * tickNs) }

    /// Reads once a period, each some µs to 3.9 ms after a step (a wake-up's latency),
    /// from a fixed pseudo-random sequence.
    static func readTimes(count: Int, from start: UInt64 = 1_000_000_000) -> [UInt64] {
        var seed: UInt64 = 0x2545_F491_4F6C_DD1D
        var times: [UInt64] = []
        for i in 0..<count {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let late = (seed >> 33) % 3_900_000 + 20_000
            times.append(start + UInt64(i) * 20_000_000 + late)
        }
        return times
    }

    @Test("a stepping pointer: the estimate is within a few frames of what was played, the reads up to a step behind")
    func followsSteps() {
        var e = sm_clock_envelope(frame: 0, ns: 0)
        var worstRead: UInt64 = 0, worstEstimate: Int64 = 0
        // One read in eight lands just after a step; the estimate holds from the first such.
        var times = Self.readTimes(count: 200)
        for i in stride(from: 3, to: times.count, by: 8) { times[i] = times[i] / Self.tickNs * Self.tickNs + 10_000 }
        for (i, t) in times.enumerated() {
            let read = Self.pointer(t)
            let got = sm_clock_envelope_step(&e, read, t, UInt32(Self.rate), Self.periodFrames, Self.played(t) + 4410)
            #expect(got >= read, "never behind the read")
            guard i > 3 else { continue }
            worstRead = max(worstRead, Self.played(t) - read)
            worstEstimate = max(worstEstimate, abs(Int64(got) - Int64(Self.played(t))))
        }
        #expect(worstRead > 150, "the reads lag by up to a step (176 frames): \(worstRead)")
        #expect(worstEstimate <= 2, "the estimate: \(worstEstimate) frames off")
    }

    @Test("a read further behind than a step is a change (a restart, a stall): taken as it is")
    func restart() {
        var e = sm_clock_envelope(frame: 0, ns: 0)
        let t0: UInt64 = 1_000_000_000
        #expect(sm_clock_envelope_step(&e, 44100, t0, 44100, 882, 100_000) == 44100)
        // 10 ms later the card says 1,000 frames less than carried: more than a period behind
        let t1 = t0 + 10_000_000
        #expect(sm_clock_envelope_step(&e, 44100 + 441 - 1000, t1, 44100, 882, 100_000) == 44100 + 441 - 1000)
        // a read within a step of the carried one: the carried one holds
        #expect(sm_clock_envelope_step(&e, 43541 + 441 - 100, t1 + 10_000_000, 44100, 882, 100_000) == 43541 + 441)
        // a read ahead of the carried one replaces it
        #expect(sm_clock_envelope_step(&e, 45000, t1 + 20_000_000, 44100, 882, 100_000) == 45000)
        #expect(e.frame == 45000 && e.ns == t1 + 20_000_000)
    }

    @Test("a best read older than half a second is not carried (drift); nothing beyond the frames written")
    func limits() {
        var e = sm_clock_envelope(frame: 0, ns: 0)
        let t0: UInt64 = 1_000_000_000
        _ = sm_clock_envelope_step(&e, 10_000, t0, 44100, 882, 50_000)
        let late = t0 + SM_CLOCK_ENVELOPE_NS
        #expect(sm_clock_envelope_step(&e, 10_000 + 22050 - 100, late, 44100, 882, 50_000) == 10_000 + 22050 - 100)
        // carried to 441 frames on, but only 200 of them written
        var f = sm_clock_envelope(frame: 0, ns: 0)
        _ = sm_clock_envelope_step(&f, 10_000, t0, 44100, 882, 10_100)
        #expect(sm_clock_envelope_step(&f, 10_000, t0 + 10_000_000, 44100, 882, 10_200) == 10_200)
        // no reads yet (ns 0): the read as it is
        var g = sm_clock_envelope(frame: 5, ns: 0)
        #expect(sm_clock_envelope_step(&g, 7, t0, 44100, 882, 100) == 7)
    }
}
