// Pairing in the catalog: a PIN works once and for five minutes, only digests are stored,
// a revoked device's token stops working.
import Foundation
import Glibc
import StillMomentCore
import Testing
@testable import StillMomentWeb

@Suite("Web pairing")
struct PairingTests {
    /// A store in a fresh temporary folder, removed afterwards.
    func withStore(_ body: (LibraryStore) throws -> Void) throws {
        var template = Array("/tmp/sm-pair-XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ buf in buf.baseAddress.flatMap { mkdtemp($0) } }) else {
            Issue.record("mkdtemp failed")
            return
        }
        let home = String(cString: p)
        defer { _ = system("rm -rf '\(home)'") }
        WebRegistration.register()   // before the catalog is opened, as main does
        try body(try LibraryStore(home: home + "/home"))
    }

    @Test("a PIN pairs once; a wrong, reused or expired one does not; a new PIN ends the old")
    func pins() throws {
        try withStore { store in
            let pairing = PairingStore(store: store)
            let (pin, expires) = try pairing.newPIN(now: 1000)
            #expect(pin.count == 6 && pin.allSatisfy(\.isNumber))
            #expect(expires == 1300)
            let wrong = pin == "000000" ? "000001" : "000000"
            #expect(try pairing.redeem(pin: wrong, deviceName: "x", now: 1001) == nil)
            #expect(try pairing.redeem(pin: "12345", deviceName: "x", now: 1001) == nil)
            #expect(try pairing.redeem(pin: "abcdef", deviceName: "x", now: 1001) == nil)
            let paired = try pairing.redeem(pin: pin, deviceName: "Phone\u{7}\n", now: 1002)
            #expect(paired?.device.name == "Phone")
            #expect(paired?.token.count == 64)
            #expect(try pairing.redeem(pin: pin, deviceName: "again", now: 1003) == nil, "used once")

            let (late, _) = try pairing.newPIN(now: 2000)
            #expect(try pairing.redeem(pin: late, deviceName: "late", now: 2301) == nil, "expired after 5 minutes")
            let (old, _) = try pairing.newPIN(now: 3000)
            let (new, _) = try pairing.newPIN(now: 3001)
            if old != new { #expect(try pairing.redeem(pin: old, deviceName: "old", now: 3002) == nil, "a new PIN ends the old") }
            #expect(try pairing.redeem(pin: new, deviceName: "new", now: 3002) != nil)
        }
    }

    @Test("tokens: found by digest only, never stored in clear; revoked means refused")
    func tokens() throws {
        try withStore { store in
            let pairing = PairingStore(store: store)
            let (pin, _) = try pairing.newPIN(now: 0)
            guard let (device, token) = try pairing.redeem(pin: pin, deviceName: "Phone", now: 1) else {
                Issue.record("not paired")
                return
            }
            #expect(try pairing.device(token: token)?.id == device.id)
            #expect(try pairing.device(token: String(token.reversed())) == nil)
            #expect(try pairing.device(token: "' OR 1=1 --") == nil)
            #expect(try pairing.device(token: token.uppercased()) == nil)
            let catalog = try String(contentsOfFile: store.databasePath, encoding: .isoLatin1)
                + ((try? String(contentsOfFile: store.databasePath + "-wal", encoding: .isoLatin1)) ?? "")
            #expect(!catalog.contains(token), "the token is not in the catalog in clear")
            #expect(!catalog.contains("pin:" + pin))
            try pairing.touch(device.id, now: 500)
            #expect(try pairing.devices().map(\.lastSeen) == [500])
            #expect(try pairing.revoke(device.id))
            #expect(try pairing.device(token: token) == nil)
            #expect(try pairing.revoke(device.id) == false)
        }
    }
}
