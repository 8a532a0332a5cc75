// A button's gestures from its key's edges (pure, the clock passed in): a press at once
// without hold or double, on release with them; a hold after 1 s; a double within 400 ms;
// contact chatter within 20 ms counted as nothing, on the press and on the release.
import Testing
@testable import StillMomentControl

@Suite("Button gestures")
struct GestureTests {
    /// Feeds edges (ms, down) and ticks up to `until`, every ms: what came out, and when.
    static func run(_ g: inout Gesture, _ edges: [(Int64, Bool)], until: Int64) -> [(Int64, Gesture.Kind)] {
        var out: [(Int64, Gesture.Kind)] = []
        var i = 0
        for t in Int64(0)...until {
            while i < edges.count && edges[i].0 == t {
                out += g.key(down: edges[i].1, at: t).map { (t, $0) }
                i += 1
            }
            out += g.tick(now: t).map { (t, $0) }
        }
        return out
    }

    @Test func pressAloneIsTakenOnTheWayDown() {
        var g = Gesture(hasHold: false, hasDouble: false)
        let out = Self.run(&g, [(10, true), (200, false), (600, true), (700, false)], until: 2000)
        #expect(out.map(\.1) == [.press, .press])
        #expect(out.map(\.0) == [10, 600])
    }

    @Test func pressAndHold() {
        var g = Gesture(hasHold: true, hasDouble: false)
        // a short press: taken on release; a long one: a hold at 1 s, nothing on release
        let out = Self.run(&g, [(10, true), (300, false), (1000, true), (3000, false)], until: 4000)
        #expect(out.map(\.1) == [.press, .hold])
        #expect(out.map(\.0) == [300, 2000])
    }

    @Test func chatterWithin20msIsOnePress() {
        var g = Gesture(hasHold: true, hasDouble: false)
        // bouncing down (5, 9, 14 ms after) and bouncing up (4, 8 ms after)
        let edges: [(Int64, Bool)] = [(100, true), (105, false), (109, true), (114, false), (118, true),
                                      (400, false), (404, true), (408, false)]
        let out = Self.run(&g, edges, until: 3000)
        #expect(out.map(\.1) == [.press])
        var single = Gesture(hasHold: false, hasDouble: false)
        #expect(Self.run(&single, edges, until: 3000).map(\.1) == [.press])
    }

    @Test func aBounceThatEndsUpSettlesAfter20ms() {
        // down, and a bounce up that stays up: the release counts 20 ms after the press
        var g = Gesture(hasHold: true, hasDouble: false)
        let out = Self.run(&g, [(100, true), (110, false)], until: 3000)
        #expect(out.map(\.1) == [.press])
        #expect(out.first?.0 == 120)
    }

    @Test func doublePress() {
        var g = Gesture(hasHold: true, hasDouble: true)
        let out = Self.run(&g, [(0, true), (100, false), (300, true), (400, false), (1000, true), (1100, false)], until: 3000)
        #expect(out.map(\.1) == [.double, .press])
        #expect(out.map(\.0) == [300, 1500])
        #expect(g.deadline == nil)
    }

    @Test func deadlineSaysWhenToLookAgain() {
        var g = Gesture(hasHold: true, hasDouble: false)
        #expect(g.deadline == nil)
        _ = g.key(down: true, at: 50)
        #expect(g.deadline == 1050)
        _ = g.key(down: false, at: 60)     // chatter: settles at 70
        #expect(g.deadline == 70)
    }
}
