/// The schedule's arithmetic, pure: zones read from the system's database, a clock passed
/// in. DST in Europe/Berlin and America/New_York, leap days, weekday lists, windows,
/// clock jumps forward and back, and the missed-run policy.
import Foundation
import PropertyBased
import Testing
@testable import StillMomentCore

@Suite("Schedule arithmetic")
struct ScheduleArithmeticTests {
    static func zone(_ name: String) throws -> ZoneRules { try #require(ZoneRules.named(name), "no zone \(name)") }
    static func at(_ iso: String) -> Int64 { LocalTime(iso8601: iso)?.unix ?? -1 }
    static func when(_ text: String) throws -> ScheduleWhen { try ScheduleWhen(parsing: text) }

    @Test("zones: offsets either side of the 2027 changes, and the footer rule past the table")
    func zones() throws {
        let berlin = try Self.zone("Europe/Berlin"), ny = try Self.zone("America/New_York")
        #expect(berlin.offset(at: Self.at("2027-03-28T00:59:59Z")) == 3600)
        #expect(berlin.offset(at: Self.at("2027-03-28T01:00:00Z")) == 7200)
        #expect(berlin.offset(at: Self.at("2027-10-31T00:59:59Z")) == 7200)
        #expect(berlin.offset(at: Self.at("2027-10-31T01:00:00Z")) == 3600)
        #expect(ny.offset(at: Self.at("2027-03-14T06:59:59Z")) == -18000)
        #expect(ny.offset(at: Self.at("2027-03-14T07:00:00Z")) == -14400)
        #expect(ny.offset(at: Self.at("2027-11-07T06:00:00Z")) == -18000)
        // Far past the TZif table: the POSIX footer decides.
        #expect(berlin.offset(at: Self.at("2090-07-01T12:00:00Z")) == 7200)
        #expect(berlin.offset(at: Self.at("2090-01-01T12:00:00Z")) == 3600)
        #expect(berlin.instants(local: Self.at("2027-03-28T02:30:00Z")).isEmpty, "02:30 does not exist that night")
        #expect(berlin.instants(local: Self.at("2027-10-31T02:30:00Z")).count == 2, "02:30 happens twice")
    }

    @Test("TZ rules: hours, minutes and seconds in range; a run of digits or minutes past 59 is refused (found by fuzz/schedule)")
    func posixRules() throws {
        #expect(PosixRule("<+0330>-3:30")?.standardOffset == 12_600)
        #expect(PosixRule("EST5EDT,M3.2.0,M11.1.0")?.dstOffset == -14_400)
        #expect(PosixRule("AAA3BBB,J60/2,300/-1:30:15") != nil)
        #expect(PosixRule("<-03>3<-02>,M10.1.0/0,M3.3.0/167") != nil, "a rule's time may reach 167 h (RFC 8536)")
        for bad in ["<+0>-3:3000", "AAA9999999999999999", "AAA25", "AAA-24:60", "AAA1:2:60", "AAA3BBB,M3.5.0/168,M10.5.0",
                    "AAA3BBB,M3.5.0/1:,M10.5.0", "AAA3BBB25,M3.5.0,M10.5.0", "AAA0010", "AAA1:00:00:"] {
            #expect(PosixRule(bad) == nil, "\(bad) read as a rule")
        }
    }

    @Test("a TZif file whose offset is beyond RFC 8536's range is not a zone")
    func tzifOffsets() throws {
        let berlin = try #require(ZoneRules.load(path: "/usr/share/zoneinfo/Europe/Berlin", name: "Europe/Berlin"))
        #expect(berlin.offset(at: Self.at("2027-07-01T00:00:00Z")) == 7200)
        var bytes = try #require(FileManager.default.contents(atPath: "/usr/share/zoneinfo/UTC")).map { $0 }
        // UTC's file, fat or slim: where its 64-bit block's first type is, from the headers'
        // counts (RFC 8536: isut, isstd, leap, time, type, char at 20…40); make it 26 h.
        func count(_ at: Int) -> Int { bytes[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) } }
        let v1 = 44 + count(32) * 5 + count(36) * 6 + count(40) + count(28) * 8 + count(24) + count(20)
        let type64 = v1 + 44 + count(v1 + 32) * 9
        #expect(ZoneRules(tzif: bytes, name: "UTC") != nil)
        #expect(Array(bytes[type64..<(type64 + 4)]) == [0, 0, 0, 0], "UTC's offset is 0")
        bytes.replaceSubrange(type64..<(type64 + 4), with: [0x00, 0x01, 0x6E, 0x30])   // 93,744 s = 26 h 2 min
        #expect(ZoneRules(tzif: bytes, name: "UTC") == nil)
        // Every zone of the system's database still loads, with its footer rule when it has one.
        var zones = 0
        let root = "/usr/share/zoneinfo/"
        let names = try #require(FileManager.default.enumerator(atPath: root))
        for case let name as String in names {
            guard let data = FileManager.default.contents(atPath: root + name), data.starts(with: Array("TZif".utf8)) else { continue }
            let zone = ZoneRules(tzif: Array(data), name: name)
            #expect(zone != nil, "\(name) does not load")
            let text = Array(data)
            if text.last == 0x0A, let start = text.dropLast().lastIndex(of: 0x0A), start + 1 < text.count - 1 {
                #expect(zone?.footer != nil, "\(name)'s rule \(String(decoding: text[(start + 1)..<(text.count - 1)], as: UTF8.self)) does not read")
            }
            zones += 1
        }
        #expect(zones > 300)
        // TZ naming a FIFO or a device is not read (it would block, or never end).
        let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("tz-fifo-\(getpid())").path
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { unlink(fifo) }
        #expect(ZoneRules.named(fifo) == nil)
        #expect(ZoneRules.named("/dev/zero") == nil)
        // TZ's guard: a TZ naming it is refused, and so is the system's zone file without a TZ,
        // each with a warning that says which.
        let named = ZoneRules.refusal(tz: ":" + fifo, tzdir: nil)
        #expect(named == ZoneRules.RefusedZone(tz: ":" + fifo, path: fifo))
        #expect(named?.message.hasPrefix("TZ=':\(fifo)' ") == true)
        let system = ZoneRules.refusal(tz: nil, tzdir: nil, localtime: fifo)
        #expect(system == ZoneRules.RefusedZone(tz: nil, path: fifo))
        #expect(system?.message.hasPrefix(fifo) == true)
        #expect(system?.message.contains("TZ=") == false)
        #expect(ZoneRules.refusal(tz: nil, tzdir: nil, localtime: "/usr/share/zoneinfo/UTC") == nil)
        #expect(ZoneRules.refusal(tz: "Europe/Berlin", tzdir: nil, localtime: fifo) == nil)
        #expect(ZoneRules.refusal(tz: "", tzdir: FileManager.default.temporaryDirectory.path, localtime: fifo) == nil)
    }

    @Test("the hour clocks skip rings once at the first valid minute; the repeated hour once, at its first occurrence")
    func dst() throws {
        let berlin = try Self.zone("Europe/Berlin"), ny = try Self.zone("America/New_York")
        let daily = try Self.when("daily 02:30")
        func on(_ w: ScheduleWhen, _ day: String, _ z: ZoneRules) -> [Int64] {
            w.occurrences(after: Self.at(day + "T00:00:00Z") - 86_400, until: Self.at(day + "T00:00:00Z") + 2 * 86_400,
                          zone: z, seed: 0).filter { z.localTime($0).date == CivilDate(day) }
        }
        #expect(on(daily, "2027-03-28", berlin) == [Self.at("2027-03-28T03:00:00+02:00")])
        #expect(on(daily, "2027-10-31", berlin) == [Self.at("2027-10-31T02:30:00+02:00")])
        #expect(on(daily, "2027-03-14", ny) == [Self.at("2027-03-14T03:00:00-04:00")])
        #expect(on(try Self.when("daily 01:30"), "2027-11-07", ny) == [Self.at("2027-11-07T01:30:00-04:00")])
        // The days around keep their time.
        #expect(on(daily, "2027-03-27", berlin) == [Self.at("2027-03-27T02:30:00+01:00")])
        #expect(on(daily, "2027-03-29", berlin) == [Self.at("2027-03-29T02:30:00+02:00")])
    }

    @Test("WHEN forms parse and print back; leap days, weekday lists, weekends")
    func forms() throws {
        for text in ["daily 06:30", "weekdays 06:30", "weekends 08:00", "mon,wed,fri 18:00", "2026-12-24 07:00",
                     "2026-12-24T07:00:30", "every 45m-1h30m between 09:00-18:00"] {
            #expect(try Self.when(text).description == text, "\(text)")
        }
        for bad in ["", "daily", "daily 25:00", "sometimes 06:00", "mond 06:00", "2027-02-29 07:00", "funday 07:00", "every 10s-20s between 09:00-10:00",
                    "every 1m-2m between 10:00-09:00", "daily 06:30:61"] {
            #expect(throws: CoreError.self, "\(bad)") { try Self.when(bad) }
        }
        let utc = ZoneRules.utc
        let leap = try Self.when("2028-02-29 07:00")
        #expect(leap.next(after: Self.at("2027-01-01T00:00:00Z"), zone: utc, seed: 0) == Self.at("2028-02-29T07:00:00Z"))
        #expect(leap.next(after: Self.at("2028-03-01T00:00:00Z"), zone: utc, seed: 0) == nil, "a date past rings no more")
        let mwf = try Self.when("mon,wed,fri 18:00")
        let week = mwf.occurrences(after: Self.at("2026-11-23T00:00:00Z"), until: Self.at("2026-11-30T00:00:00Z"), zone: utc, seed: 0)
        #expect(week == ["2026-11-23", "2026-11-25", "2026-11-27"].map { Self.at($0 + "T18:00:00Z") })
        let weekends = try Self.when("weekends 08:00").occurrences(after: Self.at("2026-11-23T00:00:00Z"),
                                                                    until: Self.at("2026-11-30T00:00:00Z"), zone: utc, seed: 0)
        #expect(weekends == ["2026-11-28", "2026-11-29"].map { Self.at($0 + "T08:00:00Z") })
        // Quiet days ring nothing.
        let quiet: Set<CivilDate> = [CivilDate(year: 2026, month: 11, day: 25)]
        #expect(mwf.occurrences(after: Self.at("2026-11-23T00:00:00Z"), until: Self.at("2026-11-30T00:00:00Z"), zone: utc,
                                seed: 0, quiet: quiet).count == 2)
    }

    @Test("random windows: inside the window, spaced within bounds, the same for the same seed and day")
    func windows() async throws {
        let w = try Self.when("every 45m-90m between 09:00-18:00")
        await propertyCheck(count: 200, input: Gen.uint64(), Gen.int(in: 0...3000)) { seed, dayOffset in
            let day = CivilDate(year: 2026, month: 1, day: 1).adding(days: dayOffset)
            let times = w.times(on: day, zone: .utc, seed: seed)
            let start = Int64(day.daysSinceEpoch) * 86_400
            var previous = start + 9 * 3600
            for t in times {
                #expect(t - previous >= 45 * 60 && t - previous <= 90 * 60 + 1)
                #expect(t < start + 18 * 3600)
                previous = t
            }
            #expect(times.count >= 5 && times.count <= 12)
            #expect(w.times(on: day, zone: .utc, seed: seed) == times)
        }
    }

    @Test("clock jumps: within 5 min late still runs, older is missed, never a burst; a jump back runs nothing twice")
    func jumps() throws {
        let utc = ZoneRules.utc
        let entries = [ScheduleDecision.Entry(id: 1, when: try Self.when("daily 07:00"), enabled: true,
                                              lastHandled: Self.at("2026-11-23T07:00:00Z")),
                       ScheduleDecision.Entry(id: 2, when: try Self.when("daily 07:10"), enabled: true,
                                              lastHandled: Self.at("2026-11-23T07:10:00Z"))]
        // NTP after a boot: the clock jumps from 2026-11-23 to 07:12 on the 26th.
        let now = Self.at("2026-11-26T07:12:00Z")
        let d = ScheduleDecision.decide(entries, now: now, zone: utc, quiet: []) { _ in 0 }
        #expect(d.run.map(\.id) == [2] && d.run.first?.at == Self.at("2026-11-26T07:10:00Z"), "2 min late: runs")
        #expect(d.missed.filter { $0.id == 1 }.count == 3, "entry 1's three mornings are missed, not run")
        #expect(d.missed.filter { $0.id == 2 }.count == 2)
        #expect(d.wake == Self.at("2026-11-27T07:00:00Z"))
        // Having run them, the clock goes back an hour: nothing runs again.
        let handled = entries.map { var e = $0; e.lastHandled = Self.at("2026-11-26T07:10:00Z"); return e }
        let back = ScheduleDecision.decide(handled, now: Self.at("2026-11-26T06:30:00Z"), zone: utc, quiet: []) { _ in 0 }
        #expect(back.run.isEmpty && back.missed.isEmpty)
        let again = ScheduleDecision.decide(handled, now: Self.at("2026-11-26T07:11:00Z"), zone: utc, quiet: []) { _ in 0 }
        #expect(again.run.isEmpty, "07:00 and 07:10 of today already handled")
        // Disabled entries neither run nor wake.
        let off = entries.map { var e = $0; e.enabled = false; return e }
        #expect(ScheduleDecision.decide(off, now: now, zone: utc, quiet: []) { _ in 0 }.wake == nil)
    }

    @Test("a one-off time has passed only before this second; one added in its own second still rings")
    func passed() throws {
        let utc = ZoneRules.utc
        let now = Self.at("2026-11-26T11:26:58Z")
        let once = try Self.when("2026-11-26T11:26:58")
        #expect(!once.hasPassed(now: now, zone: utc))
        #expect(once.hasPassed(now: now + 1, zone: utc))
        #expect(!(try Self.when("daily 06:00")).hasPassed(now: now, zone: utc), "a repeating time never has")
        #expect(!(try Self.when("every 45m-90m between 09:00-18:00")).hasPassed(now: now, zone: utc))
        // `schedule add` hands the store the second before now: the daemon runs it.
        let added = ScheduleDecision.Entry(id: 1, when: once, enabled: true, lastHandled: now - 1)
        let d = ScheduleDecision.decide([added], now: now, zone: utc, quiet: []) { _ in 0 }
        #expect(d.run.map(\.id) == [1] && d.run.first?.at == now && d.missed.isEmpty)
        // In Berlin's repeated hour, the first 02:30 (+02:00) has passed at the second.
        let berlin = try Self.zone("Europe/Berlin")
        let repeated = try Self.when("2026-10-25 02:30")
        #expect(!repeated.hasPassed(now: Self.at("2026-10-25T00:29:59Z"), zone: berlin))
        #expect(repeated.hasPassed(now: Self.at("2026-10-25T00:30:01Z"), zone: berlin))
    }
}
