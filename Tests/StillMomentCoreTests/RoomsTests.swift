// Rooms in Core: a room's name and a choice of rooms as typed and as read from a peer, a
// ring message and what a node does with it, a node's presence, the rooms' settings.
import Testing
import StillMomentAudio
@testable import StillMomentCore

@Suite("Rooms")
struct RoomsTests {
    let synced = ClockState(synchronised: true, estimatedErrorMicroseconds: 50, maximumErrorMicroseconds: 400)

    @Test("room names: a–z, 0–9 and -, 1 to 32, lower-cased; every other text refused in one line")
    func names() throws {
        for good in ["hall", "Garden", "room-2", "0", String(repeating: "a", count: 32)] {
            #expect(try RoomName(parsing: good).text == good.lowercased())
        }
        for bad in ["", "all", "ALL", "-x", "a b", "hall/", "+", "#", "häll", "a\u{0}b", "a\nb", String(repeating: "a", count: 33), "../x"] {
            #expect(throws: CoreError.self) { try RoomName(parsing: bad) }
            if let e = try? RoomName(parsing: bad) { Issue.record("\(e) was taken") }
        }
        do { _ = try RoomName(parsing: "a\nb") } catch { #expect(!error.text(.en).contains("\n") && error.text(.de).contains("Raumname")) }
    }

    @Test("a choice of rooms: all, or names by comma (each once, at most 64)")
    func choices() throws {
        #expect(try RoomChoice(parsing: "all") == .all)
        let two = try RoomChoice(parsing: "hall, garden,hall")
        #expect(two.description == "hall,garden")
        let garden = try RoomName(parsing: "garden"), dining = try RoomName(parsing: "dining")
        #expect(two.includes(garden) && !two.includes(dining))
        #expect(RoomChoice.all.includes(dining))
        for bad in ["", ",", "hall,,garden", "hall,all", (0...64).map { "r\($0)" }.joined(separator: ",")] {
            #expect(throws: CoreError.self) { try RoomChoice(parsing: bad) }
        }
    }

    func ring(at: Int64, rooms: String = "hall,garden") throws -> RoomRing {
        try RoomRing(id: "abc-1", from: "node-a", bell: "temple-bell", strikes: 2, volume: 0.5, atMilliseconds: at,
                     rooms: try RoomChoice(parsing: rooms))
    }

    @Test("a ring is the same after the wire, and each node's verdict follows its room, the instant and its clock")
    func verdicts() throws {
        let now: Int64 = 1_800_000_000_000
        let r = try ring(at: now + 300)
        #expect(try RoomRing(payload: Array(r.payload.utf8)) == r)
        let hall = try RoomName(parsing: "hall")
        #expect(r.verdict(room: hall, clock: synced, boundMilliseconds: 2, nowMilliseconds: now) == .play)
        let dining = try RoomName(parsing: "dining")
        #expect(r.verdict(room: dining, clock: synced, boundMilliseconds: 2, nowMilliseconds: now) == .notHere)
        #expect(r.verdict(room: nil, clock: synced, boundMilliseconds: 2, nowMilliseconds: now) == .notHere)
        #expect(r.verdict(room: hall, clock: synced, boundMilliseconds: 2, nowMilliseconds: now + 301) == .late(milliseconds: 1))
        let far = try ring(at: now + 60_001)
        #expect(far.verdict(room: hall, clock: synced, boundMilliseconds: 2, nowMilliseconds: now) == .tooFar(milliseconds: 60_001))
        let unsynced = ClockState(synchronised: false, estimatedErrorMicroseconds: 16_000_000, maximumErrorMicroseconds: 16_000_000)
        let v = r.verdict(room: hall, clock: unsynced, boundMilliseconds: 2, nowMilliseconds: now)
        #expect(v == .clockUnfit(unsynced) && v.text(r).contains("not synchronised"))
        let loose = ClockState(synchronised: true, estimatedErrorMicroseconds: 5000, maximumErrorMicroseconds: 9000)
        #expect(r.verdict(room: hall, clock: loose, boundMilliseconds: 2, nowMilliseconds: now) == .clockUnfit(loose))
        #expect(r.verdict(room: hall, clock: loose, boundMilliseconds: 10, nowMilliseconds: now) == .play)
    }

    @Test("a hostile peer's ring is refused before anything acts on it")
    func hostile() throws {
        let base = #"{"v":1,"id":"x","from":"n","bell":"temple-bell","strikes":1,"volume":1,"at":1800000000000,"rooms":"all"}"#
        #expect(try RoomRing(payload: Array(base.utf8)).rooms == .all)
        let attacks = [
            base.replacingOccurrences(of: #""strikes":1"#, with: #""strikes":1e300"#),
            base.replacingOccurrences(of: #""strikes":1"#, with: #""strikes":10"#),
            base.replacingOccurrences(of: #""volume":1"#, with: #""volume":1.5"#),
            base.replacingOccurrences(of: #""at":1800000000000"#, with: #""at":-5"#),
            base.replacingOccurrences(of: #""at":1800000000000"#, with: #""at":1e300"#),
            base.replacingOccurrences(of: #""bell":"temple-bell""#, with: #""bell":"../../etc/passwd""#),
            base.replacingOccurrences(of: #""bell":"temple-bell""#, with: #""bell":"a\nb""#),
            base.replacingOccurrences(of: #""rooms":"all""#, with: #""rooms":"hall/#""#),
            base.replacingOccurrences(of: #""v":1"#, with: #""v":2"#),
            base.replacingOccurrences(of: #""id":"x""#, with: #""id":"""#),
            base.replacingOccurrences(of: #""from":"n""#, with: #""from":"\#(String(repeating: "n", count: 65))""#),
            String(base.dropLast()),
            "[]", "", "null",
            base.replacingOccurrences(of: #""rooms":"all""#, with: #""rooms":"\#(String(repeating: "r,", count: 1100))r""#),
        ]
        for a in attacks {
            #expect(throws: CoreError.self, "\(a.prefix(120))") { try RoomRing(payload: Array(a.utf8)) }
        }
        // A key a newer node adds is let be.
        let newer = base.replacingOccurrences(of: #""v":1"#, with: #""v":1,"colour":"gold""#)
        #expect(try RoomRing(payload: Array(newer.utf8)).bell == "temple-bell")
    }

    @Test("a node's presence is the same after the wire; a lying one is refused")
    func presence() throws {
        let me = RoomNode(node: "pi-hall", room: try RoomName(parsing: "hall"), clock: synced, version: "1.2", online: true, seen: 5)
        let back = try RoomNode(node: "pi-hall", presence: Array(me.presence.utf8), seen: 5)
        #expect(back == me)
        for bad in [#"{"v":1,"room":"../x","synchronised":true,"estimatedErrorMicroseconds":1,"maximumErrorMicroseconds":1,"version":"1"}"#,
                    #"{"v":1,"room":"hall","synchronised":true,"estimatedErrorMicroseconds":-1,"maximumErrorMicroseconds":1,"version":"1"}"#,
                    #"{"v":1,"room":"hall","synchronised":true,"estimatedErrorMicroseconds":1,"maximumErrorMicroseconds":1,"version":"\u001b[2J"}"#,
                    String(repeating: " ", count: 1025)] {
            #expect(throws: CoreError.self) { try RoomNode(node: "x", presence: Array(bad.utf8), seen: 0) }
        }
    }

    @Test("the rooms' settings: defaults, ranges, and the instant moved by the offset")
    func settings() throws {
        RoomSettings.register()
        let plain = try RoomSettings(Settings())
        #expect(plain.room == nil && plain.site.text == "home" && plain.offsetMilliseconds == 0 && plain.clockBoundMilliseconds == 2)
        let set = try RoomSettings(Settings(values: ["room": "hall", "room-offset-ms": "12.5", "room-clock-bound-ms": "5"]))
        #expect(set.room?.text == "hall" && set.offsetMilliseconds == 12.5 && set.clockBoundMilliseconds == 5)
        for (k, v) in [("room-offset-ms", "501"), ("room-offset-ms", "nan"), ("room-offset-ms", "1e300"), ("room-clock-bound-ms", "0"),
                       ("room-clock-bound-ms", "99999"), ("room", "a/b"), ("room-site", "")] {
            #expect(throws: CoreError.self, "\(k)=\(v)") { try RoomSettings(Settings(values: [k: v])) }
        }
        let at = WallClock.milliseconds() + 1000
        let a = plain.monotonicInstant(realtimeMilliseconds: at), b = set.monotonicInstant(realtimeMilliseconds: at)
        #expect(abs(Int64(a) - Int64(b) - 12_500_000) < 200_000, "\(Int64(a) - Int64(b)) ns")
    }
}

@Suite("Rooms in the schedule")
struct RoomTimetableTests {
    func entry(_ uuid: String = "u-1", from: String = "pi-hall", when: String = "daily 18:00") throws -> RoomTimetableEntry {
        try RoomTimetableEntry(uuid: uuid, from: from, when: try ScheduleWhen(parsing: when), bell: "temple-bell", strikes: 3,
                               volume: 0.8, rooms: try RoomChoice(parsing: "hall,garden"), name: "evening", enabled: true)
    }

    @Test("an entry for rooms is the same after the wire; a hostile one is refused")
    func wire() throws {
        let e = try entry()
        #expect(try RoomTimetableEntry(payload: Array(e.payload.utf8)) == e)
        let base = e.payload
        for attack in [base.replacingOccurrences(of: "daily 18:00", with: "every 1s-2s between 00:00-23:59"),
                       base.replacingOccurrences(of: "\"strikes\":3", with: "\"strikes\":1e300"),
                       base.replacingOccurrences(of: "\"u-1\"", with: "\"../x\""),
                       base.replacingOccurrences(of: "\"evening\"", with: "\"\(String(repeating: "n", count: 81))\""),
                       base.replacingOccurrences(of: "hall,garden", with: "hall/#"),
                       String(repeating: " ", count: 2049), "{}"] {
            #expect(throws: CoreError.self, "\(attack.prefix(100))") { try RoomTimetableEntry(payload: Array(attack.utf8)) }
        }
    }

    @Test("a copy is kept, changed in place, never over an entry made here, and dropped; --replace keeps copies")
    func copies() throws {
        let home = LibraryTempHome()
        let store = try LibraryStore(home: home.path)
        let table = ScheduleStore(store: store)
        let now = Int64(1_800_000_000)
        #expect(try table.keepCopy(try entry(), now: now))
        #expect(try !table.keepCopy(try entry(), now: now))          // the same: nothing changed
        #expect(try table.keepCopy(try entry(when: "daily 19:00"), now: now))
        var all = try table.all()
        #expect(all.count == 1 && all[0].origin == "pi-hall" && all[0].uuid == "u-1" && all[0].when.description == "daily 19:00")
        #expect(all[0].rooms == (try RoomChoice(parsing: "hall,garden")) && all[0].lastHandled == now - 1)
        // Made here (with rooms): a message claiming its id from elsewhere changes nothing.
        let own = try table.add(when: try ScheduleWhen(parsing: "daily 07:00"), action: .bell(sound: "temple-bell", strikes: 1, volume: 1),
                                name: nil, now: now)
        // Every entry has its UUID (sync keeps it the same on every device); a rooms message
        // claiming an entry made here for this node changes nothing either.
        #expect(own.uuid != nil && own.rooms == nil)
        #expect(try !table.keepCopy(try entry(try #require(own.uuid), from: "intruder"), now: now))
        try table.add([NewScheduleEntry(when: try ScheduleWhen(parsing: "daily 08:00"), action: .bell(sound: "temple-bell", strikes: 1, volume: 1),
                                        name: nil, rooms: .all)], replacing: false, now: now)
        let mine = try #require(try table.all().first { $0.rooms == .all })
        let uuid = try #require(mine.uuid)
        #expect(try !table.keepCopy(try entry(uuid, from: "intruder"), now: now))
        #expect(try !table.dropCopy(uuid: uuid))
        #expect(try table.all().first { $0.uuid == uuid }?.when.description == "daily 08:00")
        // A timetable replaced is this node's own: the copy stays.
        try table.add([NewScheduleEntry(when: try ScheduleWhen(parsing: "daily 09:00"), action: .bell(sound: "temple-bell", strikes: 1, volume: 1),
                                        name: nil)], replacing: true, now: now)
        all = try table.all()
        #expect(all.count == 2 && all.contains { $0.origin == "pi-hall" })
        #expect(try table.dropCopy(uuid: "u-1"))
        #expect(try table.all().count == 1)
        // Rooms take a bell only.
        #expect(throws: CoreError.self) {
            try table.add([NewScheduleEntry(when: try ScheduleWhen(parsing: "daily 09:00"), action: .timer(preset: nil, request: TimerRequest()),
                                            name: nil, rooms: .all)], replacing: false, now: now)
        }
    }
}
