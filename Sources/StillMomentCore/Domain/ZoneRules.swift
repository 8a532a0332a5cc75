/// A time zone's rules, read from its TZif file (RFC 8536) and its POSIX TZ footer, so
/// the schedule's arithmetic is pure: a clock and a zone are passed in, and tests can use
/// Europe/Berlin and America/New_York in one process. `system` honours TZ like libc.
import Glibc

public struct ZoneRules: Sendable, Equatable {
    public struct Transition: Sendable, Equatable {
        public let at: Int64        // UTC seconds
        public let offset: Int      // seconds east of UTC from then on
    }

    public let name: String
    let transitions: [Transition]
    let initialOffset: Int
    /// The rule after the last transition (`CET-1CEST,M3.5.0,M10.5.0/3`).
    let footer: PosixRule?

    public static let utc = ZoneRules(name: "UTC", transitions: [], initialOffset: 0, footer: nil)
    /// The offsets a zone may have (seconds east of UTC; RFC 8536's range).
    public static let offsets = -89_999...93_599

    init(name: String, transitions: [Transition], initialOffset: Int, footer: PosixRule?) {
        self.name = name
        self.transitions = transitions
        self.initialOffset = initialOffset
        self.footer = footer
    }

    // MARK: loading

    /// The zone named by `TZ` (a file name or a path, `:` allowed), else /etc/localtime, else UTC.
    public static func system() -> ZoneRules {
        if let raw = getenv("TZ") {
            var tz = String(cString: raw)
            if tz.hasPrefix(":") { tz.removeFirst() }
            if tz.isEmpty { return .utc }
            if let zone = named(tz) { return zone }
            if let rule = PosixRule(tz) { return ZoneRules(name: tz, transitions: [], initialOffset: rule.standardOffset, footer: rule) }
            return .utc
        }
        return load(path: "/etc/localtime", name: "localtime") ?? .utc
    }

    /// The one guard on `TZ` for both of its readers, ours above and libc's (`localtime_r`),
    /// called first thing in `main`. libc opens whatever file a TZ value names (under
    /// `TZDIR`, else the zone database, or absolute; `..` included; `Universal` for an empty
    /// TZ, /etc/localtime without one) and waits in `open` on a FIFO; so when that file is
    /// there and is not a regular file (a FIFO, a device, a folder, or a link to one) TZ is
    /// set to `UTC0` and TZDIR removed in this process's environment, before either reads
    /// them. Returns what was refused, for a warning; nil when TZ is kept.
    @discardableResult
    public static func guardEnvironment() -> RefusedZone? {
        let refused = refusal(tz: getenv("TZ").map { String(cString: $0) }, tzdir: getenv("TZDIR").map { String(cString: $0) })
        if refused != nil {
            setenv("TZ", "UTC0", 1)
            unsetenv("TZDIR")
        }
        return refused
    }

    /// What libc would open for these TZ and TZDIR values (`localtime`: the file it reads
    /// without a TZ), when that is there and is not a regular file; nil when it is safe.
    static func refusal(tz value: String?, tzdir: String?, localtime: String = "/etc/localtime") -> RefusedZone? {
        let folder = tzdir.flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/share/zoneinfo"
        var paths: [String]
        switch value {
        case nil: paths = [localtime]
        case let tz?:
            let name = tz.hasPrefix(":") ? String(tz.dropFirst()) : tz
            if name.isEmpty { paths = [folder + "/Universal"] } else if name.hasPrefix("/") { paths = [name] } else {
                paths = [folder + "/" + name, "/usr/share/zoneinfo/" + name]
            }
        }
        var info = stat()
        for path in paths where stat(path, &info) == 0 && info.st_mode & S_IFMT != S_IFREG {
            return RefusedZone(tz: value, path: path)
        }
        return nil
    }

    /// What `guardEnvironment` refused: TZ's value, or (no TZ) the system's zone file.
    public struct RefusedZone: Sendable, Equatable {
        /// TZ as it was; nil when it was not set.
        public var tz: String?
        /// The file that is no zone.
        public var path: String

        /// The one-line warning.
        public var message: String {
            let what = " (a FIFO, a device or a folder): using UTC"
            let was = " (eine FIFO, ein Gerät oder ein Ordner): es gilt UTC"
            if let tz {
                return tr("TZ='\(Display.clean(tz))' names something that is not a time zone file" + what,
                          "TZ='\(Display.clean(tz))' nennt etwas, das keine Zeitzonendatei ist" + was)
            }
            return tr("\(Display.clean(path)) (the system's time zone, TZ is not set) is not a time zone file" + what,
                      "\(Display.clean(path)) (die Zeitzone des Systems, TZ ist nicht gesetzt) ist keine Zeitzonendatei" + was)
        }
    }

    /// A zone from the system's database (`Europe/Berlin`).
    public static func named(_ identifier: String) -> ZoneRules? {
        guard !identifier.contains(".."), identifier.utf8.count < 200 else { return nil }
        let path = identifier.hasPrefix("/") ? identifier : "/usr/share/zoneinfo/" + identifier
        return load(path: path, name: identifier)
    }

    /// Reads a TZif file: a regular file only (`TZ=/some/fifo` or a device would block or
    /// never end): looked at first, then opened without waiting and looked at again, so a
    /// FIFO put in its place meanwhile is not waited on either.
    static func load(path: String, name: String) -> ZoneRules? {
        // Looked at before it is opened: opening some devices does something.
        var before = stat()
        guard stat(path, &before) == 0, before.st_mode & S_IFMT == S_IFREG else { return nil }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        var bytes: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 16384)
        while bytes.count < 1 << 20 {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { break }
            bytes += buf[0..<n]
        }
        return ZoneRules(tzif: bytes, name: name)
    }

    /// Parses a TZif file (version 1 data is skipped for the 64-bit block of v2+).
    public init?(tzif b: [UInt8], name: String) {
        func u32(_ i: Int) -> Int? {
            guard i >= 0, i + 4 <= b.count else { return nil }
            return Int(b[i]) << 24 | Int(b[i + 1]) << 16 | Int(b[i + 2]) << 8 | Int(b[i + 3])
        }
        func i64(_ i: Int) -> Int64? {
            guard i >= 0, i + 8 <= b.count else { return nil }
            var v: UInt64 = 0
            for k in 0..<8 { v = v << 8 | UInt64(b[i + k]) }
            return Int64(bitPattern: v)
        }
        guard b.count >= 44, b[0] == 0x54, b[1] == 0x5A, b[2] == 0x69, b[3] == 0x66 else { return nil }
        let version = b[4]
        func counts(_ at: Int) -> (isut: Int, isstd: Int, leap: Int, time: Int, type: Int, char: Int)? {
            guard let a = u32(at + 20), let c = u32(at + 24), let d = u32(at + 28), let e = u32(at + 32),
                  let f = u32(at + 36), let g = u32(at + 40) else { return nil }
            return (a, c, d, e, f, g)
        }
        guard let c1 = counts(0) else { return nil }
        var start = 0
        var timeSize = 4
        var c = c1
        if version >= 0x32 {
            // Skip the 32-bit block to the 64-bit one.
            let skip = 44 + c1.time * 4 + c1.time + c1.type * 6 + c1.char + c1.leap * 8 + c1.isstd + c1.isut
            guard let c2 = counts(skip) else { return nil }
            start = skip
            c = c2
            timeSize = 8
        }
        guard c.type >= 1, c.type <= 256, c.time <= 100_000 else { return nil }
        var p = start + 44
        var times: [Int64] = []
        for k in 0..<c.time {
            guard let t = timeSize == 8 ? i64(p + k * 8) : u32(p + k * 4).map({ Int64(Int32(truncatingIfNeeded: $0)) }) else { return nil }
            times.append(t)
        }
        p += c.time * timeSize
        guard p + c.time <= b.count else { return nil }
        let indices = b[p..<(p + c.time)].map(Int.init)
        p += c.time
        var offsets: [Int] = []
        for k in 0..<c.type {
            // RFC 8536: an offset above -25 h and below 26 h.
            guard let raw = u32(p + k * 6), Self.offsets.contains(Int(Int32(truncatingIfNeeded: raw))) else { return nil }
            offsets.append(Int(Int32(truncatingIfNeeded: raw)))
        }
        p += c.type * 6 + c.char + c.leap * (timeSize + 4) + c.isstd + c.isut
        guard indices.allSatisfy({ $0 < offsets.count }) else { return nil }
        var footer: PosixRule?
        if version >= 0x32, p < b.count, b[p] == 0x0A, let end = b[(p + 1)...].firstIndex(of: 0x0A) {
            footer = PosixRule(String(decoding: b[(p + 1)..<end], as: UTF8.self))
        }
        self.init(name: name, transitions: zip(times, indices).map { Transition(at: $0, offset: offsets[$1]) },
                  initialOffset: offsets.first ?? 0, footer: footer)
    }

    // MARK: rules

    /// Seconds east of UTC at the instant `t`.
    public func offset(at t: Int64) -> Int {
        if let last = transitions.last, t >= last.at, let footer { return footer.offset(at: t) }
        if transitions.isEmpty { return footer?.offset(at: t) ?? initialOffset }
        var lo = 0, hi = transitions.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if transitions[mid].at <= t { lo = mid + 1 } else { hi = mid }
        }
        return lo == 0 ? initialOffset : transitions[lo - 1].offset
    }

    /// The instants at which the wall clock shows `local` (seconds since 1970 on the
    /// local clock): none in a gap (clocks go forward), two in an overlap (they go back),
    /// earliest first.
    public func instants(local: Int64) -> [Int64] {
        var candidates = Set<Int>()
        for probe in stride(from: local - 2 * 86_400, through: local + 2 * 86_400, by: 3600) { candidates.insert(offset(at: probe)) }
        return candidates.map { local - Int64($0) }.filter { offset(at: $0) == Int(local - $0) }.sorted()
    }

    /// The local time at instant `t`.
    public func localTime(_ t: Int64) -> LocalTime { LocalTime(unix: t, utcOffset: offset(at: t)) }
}

/// A POSIX TZ rule: `STDoffset[DST[offset][,start[/time],end[/time]]]` with `Mm.w.d`,
/// `Jn` or `n` dates (the TZif footer).
struct PosixRule: Sendable, Equatable {
    let standardOffset: Int          // seconds east of UTC
    let dstOffset: Int?
    let start: (date: DateRule, time: Int)?
    let end: (date: DateRule, time: Int)?

    enum DateRule: Sendable, Equatable {
        case monthWeekDay(month: Int, week: Int, day: Int)
        case julian1(Int)     // Jn: 1...365, no Feb 29
        case julian0(Int)     // n: 0...365
    }

    static func == (a: PosixRule, b: PosixRule) -> Bool {
        a.standardOffset == b.standardOffset && a.dstOffset == b.dstOffset
            && a.start?.date == b.start?.date && a.start?.time == b.start?.time
            && a.end?.date == b.end?.date && a.end?.time == b.end?.time
    }

    init?(_ text: String) {
        var s = Substring(text)
        func name() -> Bool {
            if s.first == "<" {
                guard let close = s.firstIndex(of: ">") else { return false }
                s = s[s.index(after: close)...]
                return true
            }
            let n = s.prefix { $0.isLetter }
            guard n.count >= 3 else { return false }
            s = s.dropFirst(n.count)
            return true
        }
        /// `[+-]hh[:mm[:ss]]`: hours at most `maxHours` (24 for an offset, 167 for a rule's
        /// time, RFC 8536) in one to three digits, minutes and seconds below 60 in one or
        /// two, so no run of digits overflows and no offset goes past a day (found by
        /// fuzz/schedule). A colon is taken only before a field.
        func clock(allowSign: Bool, maxHours: Int) -> Int? {
            var sign = 1
            if allowSign, let f = s.first, f == "+" || f == "-" {
                sign = f == "-" ? -1 : 1
                s = s.dropFirst()
            }
            var parts: [Int] = []
            while parts.count < 3 {
                let digits = s.prefix { $0.isASCII && $0.isNumber }
                guard (1...(parts.isEmpty ? 3 : 2)).contains(digits.count), let v = Int(digits),
                      v <= (parts.isEmpty ? maxHours : 59) else { return nil }
                parts.append(v)
                s = s.dropFirst(digits.count)
                if parts.count < 3, s.first == ":" { s = s.dropFirst() } else { break }
            }
            guard let h = parts.first else { return nil }
            return sign * (h * 3600 + (parts.count > 1 ? parts[1] * 60 : 0) + (parts.count > 2 ? parts[2] : 0))
        }
        func date() -> (DateRule, Int)? {
            guard s.first == "," else { return nil }
            s = s.dropFirst()
            var rule: DateRule
            if s.first == "M" {
                s = s.dropFirst()
                let f = s.prefix { $0 != "," && $0 != "/" }.split(separator: ".").compactMap { Int($0) }
                s = s.dropFirst(s.prefix { $0 != "," && $0 != "/" }.count)
                guard f.count == 3, (1...12).contains(f[0]), (1...5).contains(f[1]), (0...6).contains(f[2]) else { return nil }
                rule = .monthWeekDay(month: f[0], week: f[1], day: f[2])
            } else if s.first == "J" {
                s = s.dropFirst()
                let d = s.prefix { $0.isNumber }
                s = s.dropFirst(d.count)
                guard let n = Int(d), (1...365).contains(n) else { return nil }
                rule = .julian1(n)
            } else {
                let d = s.prefix { $0.isNumber }
                s = s.dropFirst(d.count)
                guard let n = Int(d), (0...365).contains(n) else { return nil }
                rule = .julian0(n)
            }
            var time = 7200
            if s.first == "/" {
                s = s.dropFirst()
                guard let t = clock(allowSign: true, maxHours: 167) else { return nil }
                time = t
            }
            return (rule, time)
        }
        guard name(), let std = clock(allowSign: true, maxHours: 24) else { return nil }
        standardOffset = -std
        if s.isEmpty {
            dstOffset = nil
            start = nil
            end = nil
            return
        }
        guard name() else { return nil }
        if let f = s.first, f != "," {
            guard let d = clock(allowSign: true, maxHours: 24) else { return nil }
            dstOffset = -d
        } else {
            dstOffset = standardOffset + 3600
        }
        guard let a = date(), let b = date() else { return nil }
        start = (a.0, a.1)
        end = (b.0, b.1)
    }

    /// The offset at instant `t`.
    func offset(at t: Int64) -> Int {
        guard let dst = dstOffset, let start, let end else { return standardOffset }
        let year = LocalTime(unix: t, utcOffset: standardOffset).date.year
        // Transitions are given in local time: the start in standard time, the end in DST.
        let begin = Self.day(start.date, year: year) * 86_400 + Int64(start.time) - Int64(standardOffset)
        let finish = Self.day(end.date, year: year) * 86_400 + Int64(end.time) - Int64(dst)
        if begin < finish { return t >= begin && t < finish ? dst : standardOffset }
        return t >= finish && t < begin ? standardOffset : dst    // southern hemisphere
    }

    /// Days since 1970 of the rule's date in `year`.
    static func day(_ rule: DateRule, year: Int) -> Int64 {
        let jan1 = CivilDate(year: year, month: 1, day: 1).daysSinceEpoch
        switch rule {
        case .julian0(let n): return Int64(jan1 + n)
        case .julian1(let n):
            let leapShift = CivilDate.isLeap(year) && n >= 60 ? 1 : 0
            return Int64(jan1 + n - 1 + leapShift)
        case .monthWeekDay(let month, let week, let day):
            let first = CivilDate(year: year, month: month, day: 1)
            let firstWeekday = first.weekday % 7                 // 0 = Sunday
            var d = 1 + (day - firstWeekday + 7) % 7 + (week - 1) * 7
            let last = CivilDate.daysIn(month: month, year: year)
            while d > last { d -= 7 }
            return Int64(CivilDate(year: year, month: month, day: d).daysSinceEpoch)
        }
    }
}
