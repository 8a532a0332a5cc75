// A sit in several rooms as it travels between nodes (Core's RoomSit): the same after the
// wire, what each node does with each state (start, join late at the right point, pause,
// resume, stop, left out), and a hostile peer's message refused before anything acts on it.
import Testing
import StillMomentAudio
@testable import StillMomentCore

struct RoomSitTests {
    let synced = ClockState(synchronised: true, estimatedErrorMicroseconds: 50, maximumErrorMicroseconds: 400)
    let now: Int64 = 1_800_000_000_000

    func sit(_ phase: RoomSit.Phase = .playing, at: Int64, position: Int64 = 0, rooms: String = "hall,garden",
             revision: Int = 1) throws -> RoomSit {
        var timer = try TimerRequest(text: ["duration": "20m", "interval": "5m", "gong": "temple-bell", "random-bells": "2m-4m"])
        timer.seed = 42
        return try RoomSit(id: "s1", from: "pi-hall", rooms: try RoomChoice(parsing: rooms), revision: revision, phase: phase,
                           atMilliseconds: at, position: position, timer: timer)
    }

    @Test("a sit is the same after the wire, its timer with every option (the random bells' seed too)")
    func wire() throws {
        let s = try sit(at: now + 300)
        let back = try RoomSit(payload: Array(s.payload.utf8))
        #expect(back == s)
        #expect(back.timer.seed == 42 && back.timer.randomBells != nil && back.timer.device == nil)
        // Every option a request can set reads back to the same request.
        var all = try TimerRequest(text: ["duration": "1h", "preparation": "off", "gong": "clear-strike", "gong-volume": "0.5",
                                          "strikes": "3", "interval": "7m", "interval-length": "30s", "interval-mode": "before-end",
                                          "interval-gong": "soft-interval", "interval-volume": "0.25", "bells": "1m,-2m",
                                          "ambience": "rain", "ambience-volume": "0.125", "section-gong": "clear-strike",
                                          "section-strikes": "2,1", "seed": "18446744073709551615", "ambience-during": "sit",
                                          "open": "no"])
        all.sections = nil
        #expect(try TimerRequest(text: all.text) == all)
    }

    @Test("each node's step follows its room, what it plays of the sit, the instant and its clock")
    func steps() throws {
        let hall = try RoomName(parsing: "hall"), dining = try RoomName(parsing: "dining")
        func step(_ s: RoomSit, room: RoomName? = nil, local: LocalSit = .none, at t: Int64? = nil,
                  clock: ClockState? = nil, length: Int64? = 1_200_000) -> SitStep {
            s.step(room: room ?? hall, local: local, clock: clock ?? synced, boundMilliseconds: 2, nowMilliseconds: t ?? now,
                   lead: 300, length: length)
        }
        let start = try sit(at: now + 300)
        #expect(step(start) == .start(atMilliseconds: now + 300, position: 0, late: 0))
        #expect(step(start, room: dining) == .notHere)
        #expect(step(start, local: .playing) == .nothing)
        // Less than the margin before its instant, or after it: joined a lead later, at the
        // point its timeline has reached then.
        #expect(step(start, at: now + 250) == .start(atMilliseconds: now + 550, position: 250, late: 250))
        #expect(step(start, at: now + 10_300) == .start(atMilliseconds: now + 10_600, position: 10_300, late: 10_300))
        // Over by then: not joined.
        #expect(step(start, at: now + 1_300_000) == .over)
        #expect(step(start, at: now + 1_300_000, length: nil) != .over)       // an open sit has no end
        let pause = try start.next(.paused, at: now + 5_000)
        #expect(pause.revision == 2 && pause.position == 4_700)
        #expect(step(pause, local: .playing, at: now + 4_700) == .pause(atMilliseconds: now + 5_000, position: 4_700))
        #expect(step(pause, local: .none, at: now + 4_700) == .nothing)        // not started paused
        let resume = try pause.next(.playing, at: now + 9_000)
        #expect(resume.position == 4_700 && resume.position(at: now + 10_000) == 5_700)
        #expect(step(resume, local: .paused, at: now + 8_700) == .resume(atMilliseconds: now + 9_000, position: 4_700))
        let stop = try resume.next(.stopped, at: now + 20_000)
        #expect(step(stop, local: .playing, at: now + 19_700) == .stop(atMilliseconds: now + 20_000))
        #expect(step(stop, local: .none, at: now + 19_700) == .nothing)
        // A node moved out of the sit's rooms stops its part.
        #expect(step(resume, room: dining, local: .playing, at: now + 9_500) == .stop(atMilliseconds: now + 9_500))
        // Its clock: not synchronised, or beyond the bound: left out of a start or resume.
        let unsynced = ClockState(synchronised: false, estimatedErrorMicroseconds: 16_000_000, maximumErrorMicroseconds: 16_000_000)
        let left = step(start, clock: unsynced)
        #expect(left == .clockUnfit(unsynced) && left.text(start).contains("not synchronised"))
        #expect(step(try sit(at: now + 60_001)) == .tooFar(milliseconds: 60_001))
    }

    @Test("a hostile peer's sit is refused before anything acts on it")
    func hostile() throws {
        let base = #"{"v":1,"id":"s","from":"n","rooms":"all","rev":1,"phase":"playing","at":1800000000000,"position":0,"timer":{"duration":"10m"}}"#
        #expect(try RoomSit(payload: Array(base.utf8)).timer.duration == 600_000)
        let edits: [(String, String)] = [
            (#""duration":"10m""#, #""duration":"10m","device":"file:'|touch /tmp/x'""#),
            (#""duration":"10m""#, #""duration":"10m","device":"default""#),
            (#""duration":"10m""#, #""duration":"1e300""#),
            (#""duration":"10m""#, #""nonsense":"1""#),
            (#""duration":"10m""#, #""gong":"a\u0007b""#),
            (#""at":1800000000000"#, #""at":1e300"#),
            (#""at":1800000000000"#, #""at":-1"#),
            (#""position":0"#, #""position":-5"#),
            (#""position":0"#, #""position":9000000000000"#),
            (#""rev":1"#, #""rev":0"#),
            (#""rev":1"#, #""rev":100001"#),
            (#""phase":"playing""#, #""phase":"exploding""#),
            (#""id":"s""#, #""id":"../x""#),
            (#""rooms":"all""#, #""rooms":"hall,#""#),
            (#""v":1"#, #""v":2"#),
            (#""timer":{"duration":"10m"}"#, #""timer":"10m""#),
        ]
        let many = "\"timer\":{" + (0..<30).map { "\"k\($0)\":\"1\"" }.joined(separator: ",") + "}"
        var attacks: [String] = edits.map { base.replacingOccurrences(of: $0.0, with: $0.1) }
        attacks.append(base.replacingOccurrences(of: #""timer":{"duration":"10m"}"#, with: many))
        attacks += [String(base.dropLast()), "", "[]", "null", String(repeating: " ", count: RoomSit.largest + 1)]
        for a in attacks {
            #expect(throws: CoreError.self, "\(a.prefix(140))") { try RoomSit(payload: Array(a.utf8)) }
        }
    }
}
