/// The practice log's pure parts (dates, statistics, export) and its store (open entries
/// closed after a crash, imports without duplicates).
import Foundation
import PropertyBased
import Testing
@testable import StillMomentCore

@Suite("Practice log")
struct PracticeTests {
    static func entry(_ iso: String, minutes: Int64, preset: String? = nil, teacher: String? = nil,
                      id: String = UUID().uuidString.lowercased()) -> PracticeEntry {
        PracticeEntry(id: id, kind: teacher == nil ? .timer : .guided, name: preset ?? "sit", teacher: teacher, preset: preset,
                      start: LocalTime(iso8601: iso) ?? LocalTime(unix: 0, utcOffset: 0),
                      plannedMilliseconds: minutes * 60_000, heardMilliseconds: minutes * 60_000, endReason: "completed")
    }

    @Test("civil dates: days since 1970 both ways, weekdays, leap days, Mondays")
    func civilDates() async {
        await propertyCheck(count: 2000, input: Gen.int(in: -800_000...800_000)) { days in
            #expect(CivilDate(daysSinceEpoch: days).daysSinceEpoch == days)
        }
        #expect(CivilDate(daysSinceEpoch: 0) == CivilDate(year: 1970, month: 1, day: 1))
        #expect(CivilDate(year: 1970, month: 1, day: 1).weekday == 4)          // a Thursday
        #expect(CivilDate(year: 2026, month: 11, day: 23).weekday == 1)        // a Monday
        #expect(CivilDate(year: 2028, month: 2, day: 29).adding(days: 1) == CivilDate(year: 2028, month: 3, day: 1))
        #expect(CivilDate("2027-02-29") == nil && CivilDate("2028-02-29") != nil && CivilDate("2026-13-01") == nil)
        #expect(CivilDate(year: 2026, month: 11, day: 29).weekStart == CivilDate(year: 2026, month: 11, day: 23))
    }

    @Test("ISO 8601 times with their offset read back to the same instant and local day")
    func iso() {
        let t = LocalTime(iso8601: "2026-11-24T23:30:00+01:00")
        #expect(t?.iso8601 == "2026-11-24T23:30:00+01:00")
        #expect(t?.date == CivilDate(year: 2026, month: 11, day: 24))
        #expect(LocalTime(iso8601: "2026-11-24T22:30:00Z")?.unix == t?.unix)
        #expect(LocalTime(iso8601: "2026-11-24T23:30:00-05:30")?.iso8601 == "2026-11-24T23:30:00-05:30")
        #expect(LocalTime(iso8601: "tomorrow") == nil && LocalTime(iso8601: "2026-11-24T25:00:00Z") == nil)
        // fuzz/csv's second finding: a signed run of digits read as an hour below 24 that
        // overflowed (a trap in `history import`); each field is one or two digits.
        for text in ["2026-06-30T-0000000307658858874594019:59:60+14:00", "2026-06-30T-3:00:00Z", "2026-06-30T+5:00:00Z",
                     "2026-06-30T05:-1:00Z", "2026-06-30T05:00:-1Z", "2026-06-30T05:00:00+-5:00", "2026-06-30T005:00:00Z"] {
            #expect(LocalTime(iso8601: text) == nil, "\(text)")
        }
        #expect(LocalTime(iso8601: "2026-06-30T5:07Z")?.iso8601 == "2026-06-30T05:07:00+00:00")
        let hostile = "id,kind,name,teacher,preset,meditation_id,start,planned_seconds,heard_seconds,end_reason,scheduled\r\n"
            + "2a2b3c4d-0000-4000-8000-000000000001,timer,x,,,,2026-06-30T-0000000307658858874594019:59:60+14:00,0,0,replaced,true\r\n"
        #expect(throws: PracticeExport.ImportError.self) { try PracticeExport.read(hostile) }
    }

    @Test("stats: today, the week from Monday, month, year; a sit across midnight counts for its first day")
    func stats() {
        let entries = [
            Self.entry("2026-11-24T07:00:00+01:00", minutes: 20, preset: "morning"),
            Self.entry("2026-11-23T23:50:00+01:00", minutes: 30, preset: "morning"),   // Monday, across midnight
            Self.entry("2026-11-22T08:00:00+01:00", minutes: 45, teacher: "Tara"),   // Sunday: last week
            Self.entry("2026-10-31T08:00:00+01:00", minutes: 10),
            Self.entry("2025-12-31T08:00:00+01:00", minutes: 5),
        ]
        let s = PracticeStats(entries, today: CivilDate(year: 2026, month: 11, day: 24))
        #expect(s.today == .init(sits: 1, milliseconds: 20 * 60_000))
        #expect(s.week == .init(sits: 2, milliseconds: 50 * 60_000))
        #expect(s.month == .init(sits: 3, milliseconds: 95 * 60_000))
        #expect(s.year == .init(sits: 4, milliseconds: 105 * 60_000))
        #expect(s.all.sits == 5 && s.longestMilliseconds == 45 * 60_000 && s.averageMilliseconds == 22 * 60_000)
        #expect(s.minutesByWeekday == [30, 20, 5, 0, 0, 10, 45])
        #expect(s.byPreset["morning"] == .init(sits: 2, milliseconds: 50 * 60_000))
        #expect(s.byTeacher["Tara"]?.sits == 1)
    }

    @Test("CSV and JSON exports read back to the same entries, whatever the names hold")
    func exportRoundTrip() throws {
        var e = Self.entry("2026-11-24T07:00:00+01:00", minutes: 20, preset: "a, \"quoted\"\nname", teacher: "Ü")
        e.heardMilliseconds = 1_234_567
        e.scheduled = true
        let entries = [e, Self.entry("2026-03-29T02:30:00+02:00", minutes: 1)]
        #expect(try PracticeExport.read(PracticeExport.csv(entries)) == entries)
        let json = String(decoding: try JSONEncoder().encode(PracticeExport.json(entries)), as: UTF8.self)
        #expect(try PracticeExport.read(json) == entries)
        #expect(throws: PracticeExport.ImportError.self) { try PracticeExport.read("id,kind\n1,2\n") }
        #expect(throws: PracticeExport.ImportError.self) {
            try PracticeExport.read(PracticeExport.csv(entries).replacingOccurrences(of: "completed", with: "gold-badge"))
        }
    }

    @Test("the log: an open entry of a session that died is closed as failed; imports skip what is there")
    func store() throws {
        let home = LibraryTempHome()
        let store = try LibraryStore(home: home.path)
        let log = PracticeLog(store: store)
        let open = Self.entry("2026-11-24T07:00:00+01:00", minutes: 20)
        try log.open(open)
        try log.update(id: open.id, heardMilliseconds: 65_000)
        #expect(try log.entries().isEmpty, "an open entry is not listed")
        #expect(try log.closeInterrupted() == 1)
        let closed = try log.entries()
        #expect(closed.count == 1 && closed[0].heardMilliseconds == 65_000 && closed[0].endReason == "failed")
        let more = [Self.entry("2026-11-25T07:00:00+01:00", minutes: 5), closed[0]]
        #expect(try log.add(more) == 1)
        #expect(try log.add(more) == 0)
        #expect(try log.entries(since: CivilDate("2026-11-25")).count == 1)
        #expect(try log.delete(id: closed[0].id))
        #expect(try log.entries().count == 1)
    }
}
