// The pairing lockout kept in the catalog: per client address and in all, with the time
// and the addresses injected, across a reopened store (what a restarted web app sees).
import Foundation
import Glibc
import StillMomentCore
import Testing
@testable import StillMomentWeb

@Suite("Web pairing lockout")
struct PairingLockoutTests {
    func withHome(_ body: (String) throws -> Void) throws {
        var template = Array("/tmp/sm-lockout-XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ buf in buf.baseAddress.flatMap { mkdtemp($0) } }) else {
            Issue.record("mkdtemp failed")
            return
        }
        let home = String(cString: p)
        defer { _ = system("rm -rf '\(home)'") }
        try body(home + "/home")
    }

    static func wrong(_ pin: String) -> String { pin == "000000" ? "000001" : "000000" }

    @Test("five wrong PINs lock their address, not another one; the lock ends after a minute")
    func perAddress() throws {
        try withHome { home in
            WebRegistration.register()   // before the catalog is opened, as main does
            let pairing = PairingStore(store: try LibraryStore(home: home))
            let (pin, _) = try pairing.newPIN(now: 1000)
            var answers: [PairingStore.Attempt] = []
            for i in 0..<5 { answers.append(try pairing.attempt(pin: Self.wrong(pin), deviceName: "x", address: "192.168.1.66", now: 1000 + Double(i))) }
            #expect(answers.prefix(4) == [.wrong(left: 4), .wrong(left: 3), .wrong(left: 2), .wrong(left: 1)])
            #expect(answers.last == .locked(.init(until: 1060, everyone: false)), "the fifth locks its address until a minute after the first")
            let locked = try pairing.attempt(pin: pin, deviceName: "x", address: "192.168.1.66", now: 1010)
            #expect(locked == .locked(.init(until: 1060, everyone: false)), "the right PIN from a locked address is refused too")
            let other = try pairing.attempt(pin: pin, deviceName: "phone", address: "192.168.1.20", now: 1011)
            guard case .paired(let device, _) = other else {
                Issue.record("another address is locked out too: \(other)")
                return
            }
            #expect(device.name == "phone")
            let (pin2, _) = try pairing.newPIN(now: 1061)
            let after = try pairing.attempt(pin: pin2, deviceName: "late", address: "192.168.1.66", now: 1061)
            if case .paired = after {} else { Issue.record("still locked after the minute: \(after)") }
        }
    }

    @Test("twenty wrong PINs from many addresses within a minute lock everyone; one address alone never does")
    func global() throws {
        try withHome { home in
            WebRegistration.register()   // before the catalog is opened, as main does
            let pairing = PairingStore(store: try LibraryStore(home: home))
            let (pin, _) = try pairing.newPIN(now: 2000)
            // One address sends its five a minute for three minutes: only it is ever locked.
            var t = 2000.0
            for _ in 0..<3 {
                for _ in 0..<5 { _ = try pairing.attempt(pin: Self.wrong(pin), deviceName: "x", address: "10.0.0.9", now: t) }
                t += 61
            }
            #expect(try pairing.attempt(pin: Self.wrong(pin), deviceName: "x", address: "10.0.3.1", now: t - 60) == .wrong(left: 4),
                    "one address's fives did not lock the others")
            // Twenty from five other addresses (four each: none locked alone); the 20th in a minute locks everyone.
            var last: PairingStore.Attempt?
            for i in 0..<20 { last = try pairing.attempt(pin: Self.wrong(pin), deviceName: "x", address: "10.0.1.\(i / 4)", now: t + Double(i) / 10) }
            #expect(last == .locked(.init(until: t + 60, everyone: true)))
            let fresh = try pairing.attempt(pin: pin, deviceName: "x", address: "10.0.2.1", now: t + 5)
            #expect(fresh == .locked(.init(until: t + 60, everyone: true)), "a fresh address is locked out too, the right PIN refused")
            let later = try pairing.attempt(pin: pin, deviceName: "x", address: "10.0.2.1", now: t + 61)
            if case .paired = later {} else { Issue.record("still locked after the minute: \(later)") }
        }
    }

    @Test("the lockout survives a reopened store (a restarted web app)")
    func restart() throws {
        try withHome { home in
            var pin = ""
            do {
                WebRegistration.register()   // before the catalog is opened, as main does
                let pairing = PairingStore(store: try LibraryStore(home: home))
                pin = try pairing.newPIN(now: 3000).pin
                for i in 0..<5 { _ = try pairing.attempt(pin: Self.wrong(pin), deviceName: "x", address: "::1", now: 3000 + Double(i)) }
            }
            let reopened = PairingStore(store: try LibraryStore(home: home))
            #expect(try reopened.attempt(pin: pin, deviceName: "x", address: "::1", now: 3030) == .locked(.init(until: 3060, everyone: false)))
            let right = try reopened.attempt(pin: pin, deviceName: "x", address: "::1", now: 3061)
            if case .paired = right {} else { Issue.record("not paired after the lock: \(right)") }
        }
    }
}
