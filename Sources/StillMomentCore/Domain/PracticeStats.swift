/// The practice log's entries and the plain numbers kept about them: time sat and number
/// of sits per period, average and longest, minutes per weekday, by preset and by
/// teacher. Pure: `now` is passed in. No streaks and no badges (see the README).

/// One sit or guided meditation that was heard.
public struct PracticeEntry: Sendable, Equatable, Codable {
    public var id: String               // UUID, lower case
    public var kind: SessionKind
    /// The preset's or the meditation's name at the time, or the timer's summary.
    public var name: String
    public var meditationID: String?
    public var teacher: String?
    public var preset: String?
    public var start: LocalTime
    public var plannedMilliseconds: Int64
    public var heardMilliseconds: Int64
    /// The sections, as given (`sit 25m, walk 5m, sit 25m`), if any.
    public var sections: String?
    public var endReason: String
    public var scheduled: Bool

    public init(id: String, kind: SessionKind, name: String, meditationID: String? = nil, teacher: String? = nil,
                preset: String? = nil, start: LocalTime, plannedMilliseconds: Int64, heardMilliseconds: Int64,
                sections: String? = nil, endReason: String, scheduled: Bool = false) {
        self.id = id
        self.kind = kind
        self.name = name
        self.meditationID = meditationID
        self.teacher = teacher
        self.preset = preset
        self.start = start
        self.plannedMilliseconds = plannedMilliseconds
        self.heardMilliseconds = heardMilliseconds
        self.sections = sections
        self.endReason = endReason
        self.scheduled = scheduled
    }

    /// The local day it started on (a sit across midnight counts for that day).
    public var day: CivilDate { start.date }
}

public struct PracticeStats: Sendable, Equatable, Codable {
    public struct Total: Sendable, Equatable, Codable {
        public var sits = 0
        public var milliseconds: Int64 = 0
        mutating func add(_ e: PracticeEntry) {
            sits += 1
            milliseconds += e.heardMilliseconds
        }
    }

    public var today = Total()
    public var week = Total()
    public var month = Total()
    public var year = Total()
    public var all = Total()
    public var averageMilliseconds: Int64 = 0
    public var longestMilliseconds: Int64 = 0
    /// Minutes per ISO weekday, Monday first (all time).
    public var minutesByWeekday: [Int64] = Array(repeating: 0, count: 7)
    public var byPreset: [String: Total] = [:]
    public var byTeacher: [String: Total] = [:]

    /// The numbers for `entries` as seen on `today` (the local date now; weeks start on
    /// Monday).
    public init(_ entries: [PracticeEntry], today day: CivilDate) {
        let week = day.weekStart
        var byWeekday = [Int64](repeating: 0, count: 7)
        for e in entries {
            let d = e.day
            all.add(e)
            if d == day { today.add(e) }
            if d >= week && d <= day { self.week.add(e) }
            if d.year == day.year && d.month == day.month { month.add(e) }
            if d.year == day.year { year.add(e) }
            longestMilliseconds = max(longestMilliseconds, e.heardMilliseconds)
            byWeekday[d.weekday - 1] += e.heardMilliseconds
            if let p = e.preset { byPreset[p, default: Total()].add(e) }
            if let t = e.teacher, !t.isEmpty { byTeacher[t, default: Total()].add(e) }
        }
        minutesByWeekday = byWeekday.map { $0 / 60_000 }
        averageMilliseconds = all.sits > 0 ? all.milliseconds / Int64(all.sits) : 0
    }
}

extension PracticeStats {
    /// The sits and time heard on one local day (days since 1970-01-01).
    public struct DayTotal: Sendable, Equatable {
        public var day: Int
        public var sits: Int
        public var milliseconds: Int64
        public init(day: Int, sits: Int, milliseconds: Int64) {
            self.day = day
            self.sits = sits
            self.milliseconds = milliseconds
        }
    }

    /// The same numbers as `init(_:today:)`, from totals the store keeps (per local day,
    /// preset and teacher; the longest sit): bounded by the days sat, not the entries.
    /// Keys equal as Swift strings (canonically equivalent spellings) are added together,
    /// as the dictionary of the entry-wise count does.
    public init(days: [DayTotal], byPreset presets: [(String, Total)], byTeacher teachers: [(String, Total)],
                longest: Int64, today: CivilDate) {
        let todayNumber = today.daysSinceEpoch, weekStart = today.weekStart.daysSinceEpoch
        var byWeekday = [Int64](repeating: 0, count: 7)
        for t in days {
            let d = CivilDate(daysSinceEpoch: t.day)
            let total = Total(sits: t.sits, milliseconds: t.milliseconds)
            all.add(total)
            if t.day == todayNumber { self.today.add(total) }
            if t.day >= weekStart && t.day <= todayNumber { week.add(total) }
            if d.year == today.year && d.month == today.month { month.add(total) }
            if d.year == today.year { year.add(total) }
            byWeekday[d.weekday - 1] += t.milliseconds
        }
        for (p, t) in presets { byPreset[p, default: Total()].add(t) }
        for (name, t) in teachers { byTeacher[name, default: Total()].add(t) }
        minutesByWeekday = byWeekday.map { $0 / 60_000 }
        longestMilliseconds = max(0, longest)
        averageMilliseconds = all.sits > 0 ? all.milliseconds / Int64(all.sits) : 0
    }
}

extension PracticeStats.Total {
    mutating func add(_ t: PracticeStats.Total) {
        sits += t.sits
        milliseconds += t.milliseconds
    }
}
