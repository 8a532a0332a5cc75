// Dates in the catalog as GRDB stores them ("yyyy-MM-dd HH:mm:ss.SSS", UTC), read and
// written with integer arithmetic instead of Foundation's Calendar and DateFormatter.
import FoundationEssentials
import GRDB

/// GRDB turns a stored date into a Date through a UTC Calendar and back through a
/// DateFormatter; both open ICU's time-zone data, and the first read of a meditation's
/// `dateAdded` made 1.66 MB of ICU's data table resident in the daemon for good (found
/// with the table mprotect'ed under gdb). The same text, with the days counted from the
/// civil calendar (proleptic Gregorian, as SQLite's date functions and GRDB do).
enum SQLiteDate {
    /// A stored date: the text GRDB writes (also with a `T`, without seconds or
    /// fractions), or a number of seconds since 1970. Anything else goes to GRDB's own
    /// reading, which knows more forms.
    @Sendable static func decode(_ value: DatabaseValue) -> Date? {
        switch value.storage {
        case .string(let text):
            if let seconds = parse(text) { return Date(timeIntervalSince1970: seconds) }
            return Date.fromDatabaseValue(value)
        case .int64(let n):
            return Date(timeIntervalSince1970: Double(n))
        case .double(let x):
            return Date(timeIntervalSince1970: x)
        default:
            return Date.fromDatabaseValue(value)
        }
    }

    /// The text GRDB's default encoding gives: "yyyy-MM-dd HH:mm:ss.SSS" in UTC.
    @Sendable static func encode(_ date: Date) -> (any DatabaseValueConvertible)? {
        let t = date.timeIntervalSince1970
        guard t.isFinite, abs(t) < 1e14 else { return nil }
        let totalMs = Int((t * 1000).rounded())
        let (days, msOfDay) = floorDivide(totalMs, 86_400_000)
        let s = msOfDay / 1000
        let pad = CivilDate.pad
        return "\(CivilDate(daysSinceEpoch: days)) \(pad(s / 3600, 2)):\(pad(s / 60 % 60, 2)):\(pad(s % 60, 2)).\(pad(msOfDay % 1000, 3))"
    }

    /// Seconds since 1970 of "YYYY-MM-DD[ T]HH:MM[:SS[.fraction]]", or nil.
    static func parse(_ text: String) -> Double? {
        let b = Array(text.utf8)
        var i = 0
        func number(_ digits: Int) -> Int? {
            guard i + digits <= b.count else { return nil }
            var v = 0
            for k in i..<(i + digits) {
                guard b[k] >= 48, b[k] <= 57 else { return nil }
                v = v * 10 + Int(b[k] - 48)
            }
            i += digits
            return v
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }
        guard let y = number(4), expect(UInt8(ascii: "-")), let mo = number(2), expect(UInt8(ascii: "-")),
              let d = number(2), (1...12).contains(mo), d >= 1, d <= CivilDate.daysIn(month: mo, year: y)
        else { return nil }
        var seconds = Double(CivilDate(year: y, month: mo, day: d).daysSinceEpoch) * 86_400
        guard i < b.count else { return seconds }
        guard expect(UInt8(ascii: " ")) || expect(UInt8(ascii: "T")),
              let h = number(2), h < 24, expect(UInt8(ascii: ":")), let mi = number(2), mi < 60 else { return nil }
        seconds += Double(h * 3600 + mi * 60)
        if expect(UInt8(ascii: ":")) {
            guard let s = number(2), s < 60 else { return nil }
            seconds += Double(s)
            if expect(UInt8(ascii: ".")) {
                // To the millisecond, further digits ignored, as GRDB reads it.
                var ms = 0, digits = 0
                let start = i
                while i < b.count, b[i] >= 48, b[i] <= 57 {
                    if digits < 3 { ms = ms * 10 + Int(b[i] - 48); digits += 1 }
                    i += 1
                }
                guard i > start else { return nil }
                while digits < 3 { ms *= 10; digits += 1 }
                seconds += Double(ms) / 1000
            }
        }
        return i == b.count ? seconds : nil
    }

    private static func floorDivide(_ a: Int, _ b: Int) -> (Int, Int) {
        let q = a / b, r = a % b
        return r < 0 ? (q - 1, r + b) : (q, r)
    }
}
