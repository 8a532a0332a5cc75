/// Wall-clock dates and times from a UTC instant and an offset, by pure arithmetic (the
/// proleptic Gregorian calendar, days counted from 1970-01-01): the practice log keeps
/// each sit's offset, so "the day it started" never depends on today's time zone.
import Glibc

public struct CivilDate: Sendable, Equatable, Hashable, Comparable, Codable, CustomStringConvertible {
    public var year: Int
    public var month: Int   // 1...12
    public var day: Int     // 1...31

    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// Days since 1970-01-01 (Howard Hinnant's days_from_civil).
    public var daysSinceEpoch: Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    public init(daysSinceEpoch z0: Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        day = doy - (153 * mp + 2) / 5 + 1
        month = mp < 10 ? mp + 3 : mp - 9
        year = yoe + era * 400 + (month <= 2 ? 1 : 0)
    }

    /// ISO weekday: 1 Monday … 7 Sunday.
    public var weekday: Int {
        let d = daysSinceEpoch
        return ((d % 7 + 7 + 3) % 7) + 1     // 1970-01-01 was a Thursday
    }

    /// The Monday of this date's week.
    public var weekStart: CivilDate { CivilDate(daysSinceEpoch: daysSinceEpoch - (weekday - 1)) }

    public func adding(days: Int) -> CivilDate { CivilDate(daysSinceEpoch: daysSinceEpoch + days) }

    public static func < (a: CivilDate, b: CivilDate) -> Bool { a.daysSinceEpoch < b.daysSinceEpoch }

    public var description: String { "\(Self.pad(year, 4))-\(Self.pad(month, 2))-\(Self.pad(day, 2))" }

    /// Reads `YYYY-MM-DD`.
    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]),
              (1...12).contains(m), d >= 1, d <= CivilDate.daysIn(month: m, year: y)
        else { return nil }
        self.init(year: y, month: m, day: d)
    }

    public static func isLeap(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    public static func daysIn(month m: Int, year y: Int) -> Int {
        switch m {
        case 2: return isLeap(y) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    static func pad(_ v: Int, _ width: Int) -> String {
        let s = String(abs(v))
        return (v < 0 ? "-" : "") + String(repeating: "0", count: max(0, width - s.count)) + s
    }
}

/// An instant with the UTC offset in force where it happened.
public struct LocalTime: Sendable, Equatable, Codable {
    /// Seconds since 1970-01-01T00:00:00Z.
    public var unix: Int64
    /// Seconds east of UTC.
    public var utcOffset: Int

    public init(unix: Int64, utcOffset: Int) {
        self.unix = unix
        self.utcOffset = utcOffset
    }

    /// Now, with this machine's offset (TZ honoured).
    public static func now() -> LocalTime {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return at(unix: Int64(ts.tv_sec))
    }

    /// An instant with the offset the system's time zone has then.
    public static func at(unix: Int64) -> LocalTime {
        var t = time_t(unix)
        var local = tm()
        let offset = localtime_r(&t, &local) != nil ? Int(local.tm_gmtoff) : 0
        return LocalTime(unix: unix, utcOffset: offset)
    }

    private var localSeconds: Int64 { unix + Int64(utcOffset) }

    public var date: CivilDate {
        CivilDate(daysSinceEpoch: Int(localSeconds >= 0 ? localSeconds / 86_400 : (localSeconds - 86_399) / 86_400))
    }

    /// Seconds since local midnight.
    public var secondOfDay: Int { Int(((localSeconds % 86_400) + 86_400) % 86_400) }

    /// `2026-11-24T07:00:00+01:00`.
    public var iso8601: String {
        let s = secondOfDay
        let sign = utcOffset < 0 ? "-" : "+"
        let off = abs(utcOffset)
        return "\(date)T\(CivilDate.pad(s / 3600, 2)):\(CivilDate.pad(s / 60 % 60, 2)):\(CivilDate.pad(s % 60, 2))"
            + "\(sign)\(CivilDate.pad(off / 3600, 2)):\(CivilDate.pad(off / 60 % 60, 2))"
    }

    /// Reads what `iso8601` writes (seconds optional; `Z` for UTC).
    public init?(iso8601 text: String) {
        let chars = Array(text.utf8)
        guard chars.count >= 16, chars[10] == UInt8(ascii: "T") || chars[10] == UInt8(ascii: " "),
              let date = CivilDate(String(decoding: chars[0..<10], as: UTF8.self)) else { return nil }
        var rest = String(decoding: chars[11...], as: UTF8.self)
        var offset = 0
        if rest.hasSuffix("Z") {
            rest.removeLast()
        } else if let signIndex = rest.lastIndex(where: { $0 == "+" || $0 == "-" }) {
            let zone = rest[rest.index(after: signIndex)...].split(separator: ":")
            guard zone.count == 2, let h = Self.field(zone[0]), let m = Self.field(zone[1]), h <= 14, m < 60 else { return nil }
            offset = (h * 3600 + m * 60) * (rest[signIndex] == "-" ? -1 : 1)
            rest = String(rest[..<signIndex])
        } else {
            return nil
        }
        let clock = rest.split(separator: ":")
        guard clock.count == 2 || clock.count == 3, let h = Self.field(clock[0]), let m = Self.field(clock[1]), h < 24, m < 60 else { return nil }
        let s = clock.count == 3 ? Self.field(clock[2]) : 0
        guard let s, s < 61 else { return nil }
        let local = Int64(date.daysSinceEpoch) * 86_400 + Int64(h * 3600 + m * 60 + s)
        self.init(unix: local - Int64(offset), utcOffset: offset)
    }

    /// A field of a time: one or two ASCII digits (no sign, no run of zeros: Int("-000…3")
    /// read an hour of -3×10¹⁷ that passed `< 24` and overflowed; found by fuzz/csv).
    private static func field(_ text: Substring) -> Int? {
        guard (1...2).contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text)
    }
}

extension LocalTime {
    /// As people read it: `2026-11-27 06:30` (`27.11.2026 06:30` in German), with seconds when asked.
    public func shown(seconds: Bool = false, _ language: Language = .current) -> String {
        let d = date, s = secondOfDay
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let clock = "\(two(s / 3600)):\(two(s / 60 % 60))" + (seconds ? ":\(two(s % 60))" : "")
        return language == .de ? "\(two(d.day)).\(two(d.month)).\(d.year) \(clock)" : "\(d) \(clock)"
    }
}
