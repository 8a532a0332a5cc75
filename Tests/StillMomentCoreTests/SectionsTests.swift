/// Sit-and-walk sections and random bells: pure values, tested without audio.
import PropertyBased
import Testing
@testable import StillMomentCore

@Suite("Sections and random bells")
struct SectionsTests {
    @Test("sections parse, sum and locate; bad ones are refused in one line")
    func sections() throws {
        let s = try Sections(parsing: "sit 25m, walk 5m, sit 25m")
        #expect(s.list == [Section(.sit, 1_500_000), Section(.walk, 300_000), Section(.sit, 1_500_000)])
        #expect(s.total == 3_300_000 && s.starts == [0, 1_500_000, 1_800_000])
        #expect(s.sitRanges == [0..<1_500_000, 1_800_000..<3_300_000])
        #expect(s.section(at: 1_600_000)?.kind == .walk && s.section(at: 1_600_000)?.remaining == 200_000)
        #expect(s.description == "sit 25m, walk 5m, sit 25m")
        #expect(try Sections(parsing: "sitzen 20m, gehen 5m").list.count == 2)
        for bad in ["", "sit", "run 5m", "sit 5s", "walk 5m", "sit 13h, sit 12h", "sit 5m,,sit 5m", "sit 1e15"] {
            #expect(throws: CoreError.self, "\(bad)") { try Sections(parsing: bad) }
        }
    }

    @Test("random bells: within MIN…MAX of each other inside sit sections, none in the first MIN or the last 30 s")
    func randomBells() async throws {
        let sections = (try? Sections(parsing: "sit 25m, walk 5m, sit 25m")) ?? Sections([])
        await propertyCheck(count: 300, input: Gen.int(in: 10...300), Gen.int(in: 0...600), Gen.uint64()) { lo, extra, seed in
            let bells = RandomBells(minimum: Int64(lo) * 1000, maximum: Int64(lo + extra) * 1000)
            var g = SeededGenerator(seed: seed)
            let times = bells.times(in: sections.sitRanges, using: &g)
            for r in sections.sitRanges {
                let inside = times.filter { r.contains($0) }
                var previous = r.lowerBound
                for t in inside {
                    #expect(t - previous >= bells.minimum && t - previous <= bells.maximum)
                    #expect(t <= r.upperBound - RandomBells.quietEnd)
                    previous = t
                }
            }
            #expect(times.allSatisfy { t in sections.sitRanges.contains { $0.contains(t) } }, "no bell in a walk")
            var again = SeededGenerator(seed: seed)
            #expect(bells.times(in: sections.sitRanges, using: &again) == times, "the seed repeats them")
        }
        #expect(throws: CoreError.self) { try RandomBells(parsing: "10m-3m") }
        #expect(throws: CoreError.self) { try RandomBells(parsing: "1s-3m") }
        #expect(try RandomBells(parsing: "3m-10m") == RandomBells(minimum: 180_000, maximum: 600_000))
    }
}
