/// The practice log read by SQL (pages, totals kept by triggers) gives exactly what the
/// pure, entry-by-entry reading gives: the statistics on random logs (every kind of change
/// the app makes, and rows damaged by hand), `history`'s pages and ranges, and the
/// migration that adds the totals to a log that already has entries.
import Foundation
import GRDB
import PropertyBased
import Testing
@testable import StillMomentCore

@Suite("Practice log in SQL")
struct PracticeSQLTests {
    /// SplitMix64: a reproducible log from one seed.
    struct Random: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let names: [String?] = [nil, "", "morning", "evening", "Tara", "e\u{301}", "\u{E9}", "'=x"]

    static func randomEntry(_ r: inout Random, around: Int64) -> PracticeEntry {
        // Within a few weeks of `around` mostly (so today, week and month have sits), or
        // anywhere from 1900 to 2100, with any offset of ±18 h in quarter hours.
        let start = Int.random(in: 0..<4, using: &r) == 0 ? Int64.random(in: -2_208_988_800...4_102_444_800, using: &r)
                                                         : around + Int64.random(in: -40 * 86_400...86_400, using: &r)
        let offset = Int.random(in: -72...72, using: &r) * 900
        let heard = Int64.random(in: 1...7_200_000, using: &r)
        return PracticeEntry(id: UUID().uuidString.lowercased(), kind: Bool.random(using: &r) ? .timer : .guided,
                             name: "sit", teacher: names.randomElement(using: &r) ?? nil, preset: names.randomElement(using: &r) ?? nil,
                             start: LocalTime(unix: start, utcOffset: offset), plannedMilliseconds: heard, heardMilliseconds: heard,
                             endReason: "completed", scheduled: Bool.random(using: &r))
    }

    /// Every ended row as the log read it before (all rows, then the pure checks).
    static func reference(_ store: LibraryStore) throws -> [PracticeEntry] {
        try store.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM practice WHERE endReason IS NOT NULL ORDER BY startUnix, id")
                .compactMap(PracticeLog.entry)
        }
    }

    @Test("SQL statistics equal PracticeStats over every entry, on random logs changed every way the app changes them")
    func statsEqualPure() async throws {
        await propertyCheck(count: 40, input: Gen.int(in: 0...Int.max)) { seed in
            do {
                var r = Random(state: UInt64(seed))
                let home = LibraryTempHome()
                let store = try LibraryStore(home: home.path)
                let log = PracticeLog(store: store)
                let around = Int64.random(in: 0...4_000_000_000, using: &r)
                var ids: [String] = []
                for _ in 0..<Int.random(in: 0...60, using: &r) {
                    let e = Self.randomEntry(&r, around: around)
                    switch Int.random(in: 0..<5, using: &r) {
                    case 0:           // a session that plays, updated, then closed (or left open)
                        try log.open(e)
                        try log.update(id: e.id, heardMilliseconds: e.heardMilliseconds / 2)
                        if Bool.random(using: &r) {
                            try log.close(id: e.id, heardMilliseconds: Bool.random(using: &r) ? e.heardMilliseconds : 0, reason: "stopped")
                        }
                    default:
                        _ = try log.add([e])
                    }
                    ids.append(e.id)
                }
                if Bool.random(using: &r) { try log.closeInterrupted() }
                for id in ids where Int.random(in: 0..<6, using: &r) == 0 { _ = try log.delete(id: id) }
                // Rows damaged by hand: not counted by either reading.
                if let id = ids.randomElement(using: &r) {
                    try store.write { db in try db.execute(sql: "UPDATE practice SET utcOffset = 99999 WHERE id = ?", arguments: [id]) }
                }
                if let id = ids.randomElement(using: &r) {
                    try store.write { db in try db.execute(sql: "UPDATE practice SET kind = 'gong' WHERE id = ?", arguments: [id]) }
                }
                if let id = ids.randomElement(using: &r) {     // moved and re-timed: counted on its new day
                    try store.write { db in
                        try db.execute(sql: "UPDATE practice SET startUnix = startUnix + 86000, heard = heard + 5, preset = 'moved' WHERE id = ?",
                                       arguments: [id])
                    }
                }
                let all = try Self.reference(store)
                let days = all.map(\.day) + [LocalTime(unix: around, utcOffset: 0).date, CivilDate(year: 2026, month: 11, day: 27)]
                for today in days.shuffled(using: &r).prefix(4) {
                    let sql = try log.stats(today: today)
                    let pure = PracticeStats(all, today: today)
                    #expect(sql == pure, "seed \(seed), today \(today)")
                }
                #expect(try log.isEmpty() == all.isEmpty)
                #expect(try log.entries() == all)
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
        }
    }

    @Test("history's pages and ranges in SQL are the pure filter on local days (±18 h offsets, before 1970 too)")
    func pagesEqualPure() throws {
        var r = Random(state: 7)
        let home = LibraryTempHome()
        let store = try LibraryStore(home: home.path)
        let log = PracticeLog(store: store)
        let around = Int64(-86_400 * 3)
        _ = try log.add((0..<300).map { _ in Self.randomEntry(&r, around: around) })
        let all = try Self.reference(store)
        for _ in 0..<200 {
            let a = CivilDate(daysSinceEpoch: Int.random(in: -45...2, using: &r))
            let b = CivilDate(daysSinceEpoch: Int.random(in: -45...2, using: &r))
            let since: CivilDate? = Bool.random(using: &r) ? a : nil, until: CivilDate? = Bool.random(using: &r) ? b : nil
            let limit: Int? = Bool.random(using: &r) ? Int.random(in: 1...40, using: &r) : nil
            var expected = all.filter { e in (since.map { e.day >= $0 } ?? true) && (until.map { e.day <= $0 } ?? true) }
            if let limit, expected.count > limit { expected = Array(expected.suffix(limit)) }
            #expect(try log.entries(since: since, until: until, limit: limit) == expected, "\(String(describing: since)) \(String(describing: until)) \(String(describing: limit))")
        }
        let one = all[17]
        #expect(try log.entries(idPrefix: String(one.id.prefix(8))) == [one])
        #expect(try log.entries(idPrefix: "zz").isEmpty)
    }

    @Test("the migration adds the totals of a log that was there before it")
    func migrationBackfills() throws {
        var r = Random(state: 11)
        let home = LibraryTempHome()
        let entries = (0..<50).map { _ in Self.randomEntry(&r, around: 1_795_000_000) }
        do {
            let store = try LibraryStore(home: home.path)
            _ = try PracticeLog(store: store).add(entries)
            // Back to the schema before v8: the totals gone, as a store of 3dfe736 has it.
            try store.write { db in
                for table in ["practiceDay", "practicePreset", "practiceTeacher"] { try db.execute(sql: "DROP TABLE \(table)") }
                for name in ["practiceTotalsInsert", "practiceTotalsDelete", "practiceTotalsUpdate"] { try db.execute(sql: "DROP TRIGGER \(name)") }
                try db.execute(sql: "DROP INDEX practiceOrder; DROP INDEX practiceHeard")
                try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v10-practice-totals'")
            }
        }
        let store = try LibraryStore(home: home.path)
        let today = CivilDate(year: 2026, month: 11, day: 20)
        #expect(try PracticeLog(store: store).stats(today: today) == PracticeStats(try Self.reference(store), today: today))
        #expect(try PracticeLog(store: store).stats(today: today).all.sits == 50)
    }
}
