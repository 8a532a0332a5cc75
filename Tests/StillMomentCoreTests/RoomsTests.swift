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
