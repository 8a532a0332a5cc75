/// When scheduled entries ring, as pure functions of a clock and a zone: `daily 06:30`,
/// `weekdays 06:30`, `weekends 08:00`, `mon,wed,fri 18:00`, `2026-12-24 07:00`,
/// `2026-12-24T07:00:30`, and `every 45m-90m between 09:00-18:00` (random mindfulness
/// bells in a daily window). Local wall-clock times: in the hour clocks skip, an entry
/// rings once at the first valid minute after it; in the hour they repeat, once, at its
/// first occurrence. Quiet days ring nothing.
public enum ScheduleWhen: Sendable, Equatable, Codable, CustomStringConvertible {
    /// At a time of day (seconds since midnight) on the given ISO weekdays (1 = Monday).
    case weekly(days: Set<Int>, time: Int)
    /// Once, at a local date and time.
    case once(date: CivilDate, time: Int)
    /// Random bells between `from` and `to` (seconds since midnight) each day, spaced
    /// `minimum`…`maximum` apart.
    case window(minimum: Int64, maximum: Int64, from: Int, to: Int)

    static let dayNames = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    /// Every name a day may be given, English and German, short and long.
    static let dayWords: [String: Int] = {
        var words: [String: Int] = [:]
        let lists = [dayNames, ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"],
                     ["mo", "di", "mi", "do", "fr", "sa", "so"],
                     ["montag", "dienstag", "mittwoch", "donnerstag", "freitag", "samstag", "sonntag"]]
        for list in lists { for (i, w) in list.enumerated() { words[w] = i + 1 } }
        return words
    }()

    /// Parses the WHEN of `schedule add`.
    public init(parsing raw: String) throws(CoreError) {
        let text = raw.trimmingWhitespace().lowercased()
        let words = text.split(whereSeparator: { $0.isWhitespace }).map(String.init)
        func fail(_ why: LocalizedText? = nil) -> CoreError {
            .badValue(option: "WHEN", reason: (why.map { $0 + ": " } ?? .same("")) + both(
                "'\(Display.clean(raw))' is not a time to ring: write daily 06:30, weekdays 06:30, weekends 08:00, mon,wed,fri 18:00, 2026-12-24 07:00, 2026-12-24T07:00:30 or every 45m-90m between 09:00-18:00",
                "'\(Display.clean(raw))' ist keine Zeit zum Läuten: schreib täglich 06:30, werktags 06:30, wochenende 08:00, mo,mi,fr 18:00, 2026-12-24 07:00, 2026-12-24T07:00:30 oder every 45m-90m between 09:00-18:00"))
        }
        guard text.utf8.count <= 200, !words.isEmpty else { throw fail() }
        if words[0] == "every" {
            guard words.count == 4, words[2] == "between" else { throw fail() }
            let spacing: RandomBells
            do { spacing = try RandomBells(parsing: words[1]) } catch { throw fail(both("the spacing", "der Abstand")) }
            guard spacing.minimum >= 60_000 else { throw fail(both("bells at least a minute apart", "Glocken mindestens eine Minute auseinander")) }
            let range = words[3].split(separator: "-", omittingEmptySubsequences: false)
            guard range.count == 2, let from = Self.clock(String(range[0])), let to = Self.clock(String(range[1])),
                  from < to else { throw fail(both("the window", "das Zeitfenster")) }
            self = .window(minimum: spacing.minimum, maximum: spacing.maximum, from: from, to: to)
            return
        }
        if words.count == 1, let t = words[0].firstIndex(of: "t") {
            let date = String(words[0][..<t]), time = String(words[0][words[0].index(after: t)...])
            guard let d = CivilDate(date), let s = Self.clock(time) else { throw fail() }
            self = .once(date: d, time: s)
            return
        }
        guard words.count == 2, let time = Self.clock(words[1]) else { throw fail() }
        if let d = CivilDate(words[0]) {
            self = .once(date: d, time: time)
            return
        }
        switch words[0] {
        case "daily", "täglich": self = .weekly(days: Set(1...7), time: time)
        case "weekdays", "werktags": self = .weekly(days: Set(1...5), time: time)
        case "weekends", "wochenende": self = .weekly(days: [6, 7], time: time)
        default:
            var days = Set<Int>()
            for name in words[0].split(separator: ",", omittingEmptySubsequences: false) {
                guard let day = Self.dayWords[String(name)] else { throw fail(both("'\(name)' is not a day", "'\(name)' ist kein Tag")) }
                days.insert(day)
            }
            self = .weekly(days: days, time: time)
        }
    }

    /// `06:30` or `06:30:15` → seconds since midnight.
    public static func clock(_ text: String) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 || parts.count == 3,
              parts.allSatisfy({ (1...2).contains($0.count) && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let h = Int(parts[0]), let m = Int(parts[1]), h < 24, m < 60 else { return nil }
        let s = parts.count == 3 ? Int(parts[2]) ?? 60 : 0
        guard s < 60 else { return nil }
        return h * 3600 + m * 60 + s
    }

    static func clockText(_ s: Int) -> String {
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return s % 60 == 0 ? "\(two(s / 3600)):\(two(s / 60 % 60))" : "\(two(s / 3600)):\(two(s / 60 % 60)):\(two(s % 60))"
    }

    public var description: String {
        switch self {
        case .weekly(let days, let time):
            let name: String
            if days == Set(1...7) { name = "daily" } else if days == Set(1...5) { name = "weekdays" } else if days == [6, 7] {
                name = "weekends"
            } else { name = days.sorted().map { Self.dayNames[$0 - 1] }.joined(separator: ",") }
            return "\(name) \(Self.clockText(time))"
        case .once(let date, let time):
            return time % 60 == 0 ? "\(date) \(Self.clockText(time))" : "\(date)T\(Self.clockText(time))"
        case .window(let lo, let hi, let from, let to):
            return "every \(TimeText.compact(lo))-\(TimeText.compact(hi)) between \(Self.clockText(from))-\(Self.clockText(to))"
        }
    }

    // MARK: occurrences

    /// The instant a wall-clock time on `date` rings: the first occurrence in an overlap,
    /// the first valid minute after it in a gap.
    public static func instant(_ date: CivilDate, _ time: Int, _ zone: ZoneRules) -> Int64 {
        var local = Int64(date.daysSinceEpoch) * 86_400 + Int64(time)
        for _ in 0..<(4 * 60) {
            if let first = zone.instants(local: local).first { return first }
            local = (local / 60 + 1) * 60          // the next whole minute
        }
        return local - Int64(zone.offset(at: local))
    }

    /// The times this entry rings on local `date` (in order), skipping none; `seed`
    /// draws a window's random bells (the same for the same entry and day).
    public func times(on date: CivilDate, zone: ZoneRules, seed: UInt64) -> [Int64] {
        switch self {
        case .weekly(let days, let time):
            return days.contains(date.weekday) ? [Self.instant(date, time, zone)] : []
        case .once(let d, let time):
            return d == date ? [Self.instant(date, time, zone)] : []
        case .window(let lo, let hi, let from, let to):
            var generator = SeededGenerator(seed: seed ^ UInt64(bitPattern: Int64(date.daysSinceEpoch)) &* 0x9E37_79B9_7F4A_7C15)
            var out: [Int64] = []
            var t = Int64(from) * 1000
            while true {
                t += Int64.random(in: lo...hi, using: &generator)
                guard t / 1000 < Int64(to) else { break }
                out.append(Self.instant(date, Int(t / 1000), zone))
            }
            return out
        }
    }

    /// A one-off time before the second `now`: it would never ring, so `schedule add`
    /// refuses it (a time in this very second still rings).
    public func hasPassed(now: Int64, zone: ZoneRules) -> Bool {
        guard case .once(let date, let time) = self else { return false }
        return Self.instant(date, time, zone) < now
    }

    /// The occurrences in (after, until], at most `limit`, skipping quiet days.
    public func occurrences(after: Int64, until: Int64, zone: ZoneRules, seed: UInt64, quiet: Set<CivilDate> = [],
                            limit: Int = 1000) -> [Int64] {
        var out: [Int64] = []
        var day = zone.localTime(after).date.adding(days: -1)
        let lastDay = zone.localTime(until).date.adding(days: 1)
        if case .once(let d, _) = self {
            guard d >= day, d <= lastDay, !quiet.contains(d) else { return [] }
            day = d
        }
        var guardDays = 0
        while day <= lastDay && out.count < limit && guardDays < 40_000 {
            if !quiet.contains(day) {
                for t in times(on: day, zone: zone, seed: seed) where t > after && t <= until {
                    out.append(t)
                    if out.count >= limit { break }
                }
            }
            if case .once = self { break }
            day = day.adding(days: 1)
            guardDays += 1
        }
        return out.sorted()
    }

    /// The next occurrence after `after` (within ten years).
    public func next(after: Int64, zone: ZoneRules, seed: UInt64, quiet: Set<CivilDate> = []) -> Int64? {
        var from = after
        // Look ahead a month at a time: cheap for daily entries, bounded for rare ones.
        for _ in 0..<130 {
            let until = from + 31 * 86_400
            if let t = occurrences(after: from, until: until, zone: zone, seed: seed, quiet: quiet, limit: 1).first { return t }
            if case .once(let d, _) = self, zone.localTime(until).date > d { return nil }
            from = until
        }
        return nil
    }
}

/// What the daemon's scheduler decides at a moment: what to run now, what was missed,
/// and when to wake next. Pure: the clock, the entries and what already ran are passed in.
public enum ScheduleDecision {
    /// How late an entry may still run after the clock jumped (NTP after a boot).
    public static let lateness: Int64 = 300

    public struct Entry: Sendable, Equatable {
        public var id: Int64
        public var when: ScheduleWhen
        public var enabled: Bool
        /// The last occurrence handled (run, skipped or missed): never run again.
        public var lastHandled: Int64
        public init(id: Int64, when: ScheduleWhen, enabled: Bool, lastHandled: Int64) {
            self.id = id
            self.when = when
            self.enabled = enabled
            self.lastHandled = lastHandled
        }
    }

    public struct Outcome: Sendable, Equatable {
        /// Occurrences to run now (entry id, the occurrence's time).
        public var run: [(id: Int64, at: Int64)] = []
        /// Occurrences passed more than `lateness` ago: recorded, never run late.
        public var missed: [(id: Int64, at: Int64)] = []
        /// When to look again (nil: nothing is scheduled).
        public var wake: Int64?
        /// The same to the fraction of a second, where a caller looks ahead of some entries.
        public var wakeAt: Double?

        public init() {}

        public static func == (a: Outcome, b: Outcome) -> Bool {
            a.run.map(\.id) == b.run.map(\.id) && a.run.map(\.at) == b.run.map(\.at)
                && a.missed.map(\.id) == b.missed.map(\.id) && a.missed.map(\.at) == b.missed.map(\.at) && a.wake == b.wake
        }
    }

    /// At `now`: each enabled entry's occurrences after its last handled one and up to
    /// now are due; the latest within `lateness` runs, older ones are missed. A clock
    /// that went back finds nothing due (the last handled one is in the future).
    public static func decide(_ entries: [Entry], now: Int64, zone: ZoneRules, quiet: Set<CivilDate>,
                              seed: (Int64) -> UInt64) -> Outcome {
        var outcome = Outcome()
        for e in entries where e.enabled {
            let from = max(e.lastHandled, now - 40 * 86_400)
            let due = e.when.occurrences(after: from, until: now, zone: zone, seed: seed(e.id), quiet: quiet, limit: 5000)
            if let latest = due.last {
                for t in due.dropLast() { outcome.missed.append((e.id, t)) }
                if now - latest <= lateness { outcome.run.append((e.id, latest)) } else { outcome.missed.append((e.id, latest)) }
            }
            let after = max(now, e.lastHandled, due.last ?? now)
            if let next = e.when.next(after: after, zone: zone, seed: seed(e.id), quiet: quiet) {
                outcome.wake = min(outcome.wake ?? next, next)
            }
        }
        outcome.run.sort { $0.at < $1.at }
        return outcome
    }
}
