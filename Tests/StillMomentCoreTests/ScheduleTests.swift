import Testing
@testable import StillMomentCore

@Suite("Times and the gong schedule (pure)")
struct ScheduleTests {
    @Test("times are read as people write them")
    func timeText() throws {
        #expect(try TimeText.parse("20m") == 1_200_000)
        #expect(try TimeText.parse("90s") == 90_000)
        #expect(try TimeText.parse("1h15m") == 4_500_000)
        #expect(try TimeText.parse("12m30s") == 750_000)
        #expect(try TimeText.parse("15") == 900_000)
        #expect(try TimeText.parse("2.5") == 150_000)
        #expect(try TimeText.parse("3:20") == 200_000)
        #expect(try TimeText.parse("1:02:03") == 3_723_000)
        #expect(try TimeText.parse(" 5M ") == 300_000)
        for bad in ["", "abc", "5x", "m", "5m5m", "30s5m", "-5m", "3:75", "1:2:3:4", "5 m"] {
            #expect(throws: TimeText.ParseError.self, "\(bad)") { try TimeText.parse(bad) }
        }
        #expect(try TimeText.parseSigned("-2m") == (true, 120_000))
        #expect(TimeText.clock(3_723_000) == "1:02:03")
        #expect(TimeText.clock(59_999) == "00:59")
        #expect(TimeText.compact(4_500_000) == "1h15m")
    }

    let m: Int64 = 60_000

    @Test("repeating: at N, 2N, … but never at the end or in the last 5 s")
    func repeating() {
        #expect(GongSchedule.intervalTimes(duration: 20 * m, interval: 5 * m, mode: .repeating) == [5 * m, 10 * m, 15 * m])
        #expect(GongSchedule.intervalTimes(duration: 21 * m, interval: 5 * m, mode: .repeating) == [5 * m, 10 * m, 15 * m, 20 * m])
        // 10m session, every 3m20s: 3:20, 6:40 (10:00 is the end)
        #expect(GongSchedule.intervalTimes(duration: 10 * m, interval: 200_000, mode: .repeating) == [200_000, 400_000])
        // A gong 4 s before the end is dropped; 5 s before is kept.
        #expect(GongSchedule.intervalTimes(duration: 10 * m + 4_000, interval: 5 * m, mode: .repeating) == [5 * m])
        #expect(GongSchedule.intervalTimes(duration: 10 * m + 5_000, interval: 5 * m, mode: .repeating) == [5 * m, 10 * m])
    }

    @Test("after-start and before-end sound once")
    func once() {
        #expect(GongSchedule.intervalTimes(duration: 20 * m, interval: 5 * m, mode: .afterStart) == [5 * m])
        #expect(GongSchedule.intervalTimes(duration: 20 * m, interval: 5 * m, mode: .beforeEnd) == [15 * m])
        // before-end with N under 5 s lands in the quiet tail: none.
        #expect(GongSchedule.intervalTimes(duration: 20 * m, interval: 3_000, mode: .beforeEnd) == [])
        #expect(GongSchedule.intervalTimes(duration: 20 * m, interval: 5_000, mode: .beforeEnd) == [20 * m - 5_000])
    }

    @Test("an interval equal to or longer than the session gives no gong", arguments: IntervalMode.allCases)
    func tooLong(_ mode: IntervalMode) {
        #expect(GongSchedule.intervalTimes(duration: 10 * m, interval: 10 * m, mode: mode) == [])
        #expect(GongSchedule.intervalTimes(duration: 10 * m, interval: 11 * m, mode: mode) == [])
        #expect(GongSchedule.intervalTimes(duration: 10 * m, interval: 0, mode: mode) == [])
    }

    @Test("bells: negative times count from the end, sorted")
    func bells() throws {
        #expect(try GongSchedule.bellTimes("5m,12m30s,-2m", duration: 20 * m) == [5 * m, 750_000, 18 * m])
        #expect(try GongSchedule.bellTimes("-2m, 1m", duration: 20 * m) == [m, 18 * m])
    }

    @Test("bells: duplicates, out-of-range and quiet-tail times are refused with a message",
          arguments: [("5m,5m", "same time"), ("5m,-15m", "same time"), ("25m", "outside"), ("-25m", "outside"),
                      ("0s", "outside"), ("20m", "outside"), ("19m57s", "last 5 s"), ("-3s", "last 5 s"),
                      ("5m,,6m", "empty"), ("soon", "not a time")])
    func badBells(_ list: String, _ words: String) {
        do {
            _ = try GongSchedule.bellTimes(list, duration: 20 * m)
            Issue.record("\(list) accepted")
        } catch {
            #expect(error.description.contains(words), "\(error.description)")
            #expect(error.description.hasPrefix("--bells:"))
        }
    }

    @Test("strikes follow each other 4 s apart")
    func strikes() {
        #expect(GongSchedule.strikeOffsets(strikes: 1) == [0])
        #expect(GongSchedule.strikeOffsets(strikes: 3) == [0, 4_000, 8_000])
        #expect(GongSchedule.strikeOffsets(strikes: 0) == [0])
    }
}

@Suite("The timer plan (pure)")
struct PlanTests {
    static let catalog = SoundCatalog(folder: "/nonexistent", sounds: [
        Sound(id: "bell", filename: "bell.mp3", kind: .gong, volume: 1, name: .init(en: "B", de: "B"), description: .init(en: "", de: "")),
        Sound(id: "soft", filename: "soft.mp3", kind: .interval, volume: 0.75, name: .init(en: "S", de: "S"), description: .init(en: "", de: "")),
        Sound(id: "silent", filename: nil, kind: .ambience, volume: 0.15, name: .init(en: "-", de: "-"), description: .init(en: "", de: "")),
        Sound(id: "wind", filename: "wind.m4a", kind: .ambience, volume: 0.15, name: .init(en: "W", de: "W"), description: .init(en: "", de: "")),
    ])

    func config(_ options: [String: String]) throws(CoreError) -> TimerConfiguration {
        var o = ["gong": "bell", "interval-gong": "soft"]
        o.merge(options) { $1 }
        return try TimerConfiguration(settings: Settings(), options: o, catalog: Self.catalog)
    }

    @Test("states, times and the session's length")
    func plan() throws {
        let c = try config(["duration": "10m", "preparation": "10s", "interval": "3m", "strikes": "2", "ambience": "wind"])
        let rate = 1000   // one frame per millisecond keeps the arithmetic readable
        let p = TimerPlan(configuration: c, rate: rate, gongFrames: 8_000, hasAmbience: true)
        #expect(p.meditationStart == 10_000)
        #expect(p.startStrikes == [10_000, 14_000])
        #expect(p.startGongEnd == 22_000)
        #expect(p.intervalGongs == [190_000, 370_000, 550_000])
        #expect(p.meditationEnd == 610_000)
        #expect(p.endStrikes == [610_000, 614_000])
        #expect(p.total == 622_000)     // preparation + duration + the end gong's ring-out
        #expect(p.ambience == .init(start: 22_000, fadeIn: 10_000, fadeOutStart: 610_000, fadeOut: 3_000))
        #expect(p.state(at: 0) == .preparation)
        #expect(p.state(at: 10_000) == .startGong)
        #expect(p.state(at: 22_000) == .running)
        #expect(p.state(at: 610_000) == .endGong)
        #expect(p.state(at: 622_000) == .completed)
        #expect(p.remaining(at: 5_000) == 5_000)           // preparation counts down
        #expect(p.remaining(at: 10_000) == 600_000)        // the countdown runs during the start gong
        #expect(p.elapsed(at: 70_000) == 60_000)
        #expect(p.nextGong(after: 200_000) == 370_000)
        #expect(p.nextGong(after: 600_000) == 610_000)
    }

    @Test("options are checked, each with a one-line message")
    func badOptions() {
        let cases: [([String: String], String)] = [
            (["duration": "0s"], "shorter than 1 s"), (["duration": "25h"], "longer than 24 h"),
            (["duration": "soon"], "not a time"), (["gong-volume": "1.5"], "not a volume"),
            (["ambience-volume": "-0.1"], "not a volume"), (["gong": "nope"], "unknown gong 'nope'; choose one of: bell, soft"),
            (["ambience": "sea"], "choose one of: silent, wind"), (["interval-mode": "sometimes"], "not one of"),
            (["strikes": "0"], "from 1 to 9"), (["bells": "5m,5m"], "same time"), (["device": ""], "aplay -L"),
        ]
        for (options, words) in cases {
            do {
                _ = try config(options)
                Issue.record("\(options) accepted")
            } catch {
                #expect(error.description.contains(words), "\(options): \(error.description)")
                #expect(!error.description.contains("\n"))
            }
        }
    }

    @Test("--bells replaces --interval; silent means no ambience; preparation off")
    func precedence() throws {
        let c = try config(["duration": "20m", "interval": "5m", "bells": "-2m", "ambience": "silent", "preparation": "off"])
        #expect(c.intervalTimes == [18 * 60_000])
        #expect(c.ambience == nil)
        #expect(c.preparation == 0)
        let d = try config(["duration": "20m", "interval": "on"])
        #expect(d.intervalTimes == [300_000, 600_000, 900_000])
    }
}
