// The one enum of what a session is (its wire names) and the one preemption rule
// (SessionKind.admits): every pair of kinds, and the cases the audio-session coordinator
// checked before the rule replaced it.
import Foundation
import Testing
@testable import StillMomentCore

@Suite("Session kinds and the preemption rule")
struct PreemptionTests {
    @Test("every pair: the same kind replaces, a bell never interrupts, a guided meditation is suspended, the rest stop")
    func everyPair() {
        // Rows: the session playing; columns: the one asking for the device.
        let table: [SessionKind: [SessionKind: Preemption]] = [
            .timer: [.timer: .replace, .guided: .stop, .preview: .stop, .bell: .refuse],
            .guided: [.timer: .suspend, .guided: .replace, .preview: .suspend, .bell: .refuse],
            .preview: [.timer: .stop, .guided: .stop, .preview: .replace, .bell: .refuse],
            .bell: [.timer: .stop, .guided: .stop, .preview: .stop, .bell: .refuse],
        ]
        var pairs = 0
        for playing in SessionKind.allCases {
            for incoming in SessionKind.allCases {
                #expect(playing.admits(incoming) == table[playing]?[incoming], "\(playing) admits \(incoming)")
                pairs += 1
            }
        }
        #expect(pairs == 16)
    }

    @Test("the coordinator's cases: a guided meditation stops a timer, a timer suspends it, a preview too, a timer stops a preview")
    func coordinatorCases() {
        #expect(SessionKind.timer.admits(.guided) == .stop)
        #expect(SessionKind.guided.admits(.timer) == .suspend)
        #expect(SessionKind.guided.admits(.preview) == .suspend)
        #expect(SessionKind.preview.admits(.timer) == .stop)
        #expect(SessionKind.timer.admits(.timer) == .replace)
    }

    @Test("why the session playing ends: replaced, preempted by the new kind, or not at all")
    func endReasons() {
        #expect(Preemption.replace.endReason(for: .timer) == .replaced)
        #expect(Preemption.stop.endReason(for: .guided) == .preempted(by: .guided))
        #expect(Preemption.suspend.endReason(for: .timer) == .preempted(by: .timer))
        #expect(Preemption.refuse.endReason(for: .bell) == nil)
        #expect(EndReason.preempted(by: .preview).name == "preempted")
    }

    @Test("the wire's names, and which kinds are practice")
    func names() throws {
        #expect(SessionKind.allCases.map(\.rawValue) == ["timer", "guided", "preview", "bell"])
        let json = String(decoding: try JSONEncoder().encode([SessionKind.guided, .bell]), as: UTF8.self)
        #expect(json == #"["guided","bell"]"#)
        #expect(try JSONDecoder().decode(SessionKind.self, from: Data(#""preview""#.utf8)) == .preview)
        #expect(SessionKind.allCases.filter(\.isPractice) == [.timer, .guided])
    }
}
