// The one enum of what a session is: its wire names and its facts.
import Foundation
import Testing
@testable import StillMomentCore

@Suite("Session kinds")
struct PreemptionTests {
    @Test("the wire's names, and which kinds are practice")
    func names() throws {
        #expect(SessionKind.allCases.map(\.rawValue) == ["timer", "guided", "preview", "bell"])
        let json = String(decoding: try JSONEncoder().encode([SessionKind.guided, .bell]), as: UTF8.self)
        #expect(json == #"["guided","bell"]"#)
        #expect(try JSONDecoder().decode(SessionKind.self, from: Data(#""preview""#.utf8)) == .preview)
        #expect(SessionKind.allCases.filter(\.isPractice) == [.timer, .guided])
    }
}
