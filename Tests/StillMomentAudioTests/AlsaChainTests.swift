// What the ALSA backend reads from a PCM's dump (sm_alsa_chain_read, alsa_chain.c): whether
// a rate plugin is in the chain, and whether the pointer is the card's. The dumps are real,
// taken in the sound-card rig's guest (Tests/Fixtures/alsa-dumps.txt).
import CAudio
import Foundation
import Testing

@Suite("ALSA chains")
struct AlsaChainTests {
    /// The fixture's dumps by PCM name (each follows a line "== name: ...").
    static let dumps: [String: String] = {
        guard let text = try? String(contentsOfFile: Fixtures.path("alsa-dumps.txt"), encoding: .utf8) else { return [:] }
        var result: [String: String] = [:]
        var name: String?
        var lines: [String] = []
        func flush() { if let name { result[name] = lines.joined(separator: "\n") + "\n" } }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("#") { continue }
            if line.hasPrefix("== ") {
                flush()
                let header = line.dropFirst(3)
                name = header.range(of: ": ").map { String(header[..<$0.lowerBound]) }
                lines = []
            } else {
                lines.append(String(line))
            }
        }
        flush()
        return result
    }()

    /// The text's bytes, without its terminating NUL (the reader takes a length).
    static func read(_ text: String) -> sm_alsa_chain {
        text.utf8CString.withUnsafeBufferPointer { sm_alsa_chain_read($0.baseAddress, $0.count - 1) }
    }

    @Test("each PCM of the rig, classified", arguments: [
        // (name, rate plugin, the card's pointer)
        ("hw:Loopback,0", false, true),
        ("plughw:Loopback,0", false, true),          // a plug with nothing to convert: the card itself
        ("p16", false, true),                        // float to S16 in front of the card (a Pi's jack)
        ("route4", false, true),                     // S16, four channels, float again: all one to one
        ("prate", true, false),                      // a rate plugin a user configured
        ("smdmix", false, false),                    // the rig's dmix
        ("default", false, false),                   // Debian's default: softvol over dmix
    ])
    func classified(name: String, rate: Bool, card: Bool) throws {
        let dump = try #require(Self.dumps[name], "the fixture has a dump of \(name)")
        let chain = Self.read(dump)
        #expect((chain.rate_plugin != 0) == rate)
        #expect((chain.card_pointer != 0) == card)
    }

    @Test("the fixture holds all seven dumps")
    func fixture() {
        #expect(Self.dumps.count == 7)
    }

    @Test("what cannot be read is not taken for the card")
    func unreadable() {
        for text in ["", "\n", "Plug PCM: ", "Plug PCM: Hardware", "Slave: ", "Hardware PC",
                     "Plug PCM: Linear conversion PCM (S16_LE)\n",   // cut before its slave
                     "Plug PCM: Soft volume PCM\nSlave: Hardware PCM card 0 'X' device 0 subdevice 0\n",
                     "Plug PCM: Null PCM\n"] {
            let chain = Self.read(text)
            #expect(chain.card_pointer == 0, "\(text.debugDescription)")
            #expect(chain.rate_plugin == 0, "\(text.debugDescription)")
        }
        let none = sm_alsa_chain_read(nil, 5)
        #expect(none.card_pointer == 0 && none.rate_plugin == 0)
        // Unterminated, and a rate plugin anywhere in it, titled or not.
        #expect(Self.read("Hardware PCM card 1 'Y' device 0 subdevice 0").card_pointer == 1)
        #expect(Self.read("Direct Stream Mixing PCM\nRate conversion PCM (48000)\n").rate_plugin == 1)
    }
}
