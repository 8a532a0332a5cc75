// The device-name guard: the forms users play on pass, every inline ALSA definition and
// every plugin that writes files or runs commands is refused, whatever the spelling.
import Foundation
import Testing
@testable import StillMomentAudio

@Suite("Device names")
struct DeviceNameTests {
    static let accepted: [(String, DeviceName.Form)] = [
        ("default", .card("default")), ("null", .null), ("pulse", .pulse(sink: nil)),
        ("pulse:alsa_output.pci-0000_00_1f.3.analog-stereo", .pulse(sink: "alsa_output.pci-0000_00_1f.3.analog-stereo")),
        ("pulse:bluez_sink.00_11_22_33_44_55.a2dp_sink", .pulse(sink: "bluez_sink.00_11_22_33_44_55.a2dp_sink")),
        ("hw", .card("hw")), ("hw:0", .card("hw:0")), ("hw:1,0", .card("hw:1,0")), ("hw:1,0,0", .card("hw:1,0,0")),
        ("hw:Loopback,0", .card("hw:Loopback,0")), ("plughw:CARD=Headphones,DEV=0", .card("plughw:CARD=Headphones,DEV=0")),
        ("hw:CARD=Loopback,DEV=0,SUBDEV=1", .card("hw:CARD=Loopback,DEV=0,SUBDEV=1")),
        ("sysdefault:CARD=PCH", .card("sysdefault:CARD=PCH")), ("dmix:CARD=vc4hdmi0,DEV=0", .card("dmix:CARD=vc4hdmi0,DEV=0")),
        ("dsnoop:0", .card("dsnoop:0")), ("default:CARD=Device_1", .card("default:CARD=Device_1")),
        ("front:CARD=PCH,DEV=0", .configured("front:CARD=PCH,DEV=0")), ("hdmi:CARD=vc4hdmi,DEV=0", .configured("hdmi:CARD=vc4hdmi,DEV=0")),
        ("iec958:CARD=PCH,DEV=0", .configured("iec958:CARD=PCH,DEV=0")), ("my-dac", .configured("my-dac")),
        ("equal", .configured("equal")), ("  hw:1,0 \n", .card("hw:1,0")),
        ("snapcast", .snapcast(pipe: nil)), ("snapcast:/tmp/snapfifo", .snapcast(pipe: "/tmp/snapfifo")),
        ("snapcast:/run/snapserver/meditation-1.fifo", .snapcast(pipe: "/run/snapserver/meditation-1.fifo")),
    ]

    @Test("the forms a user plays on are accepted, as what they are")
    func accepted() throws {
        for (text, form) in Self.accepted {
            let name = try DeviceName(parsing: text, allowingTestFiles: false)
            #expect(name.form == form, "\(text)")
            #expect(!name.forcedALSA)
            #expect(name.text == text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let forced = try DeviceName(parsing: "alsa:pulse", allowingTestFiles: false)
        #expect(forced.forcedALSA && forced.form == .configured("pulse") && forced.text == "alsa:pulse")
        #expect(try DeviceName(parsing: "alsa:hw:1,0", allowingTestFiles: false).form == .card("hw:1,0"))
    }

    /// What an attacker's hour tried, and its relatives.
    static let refused: [(String, DeviceNameError)] = [
        ("file:FILE=\"|id>/tmp/proof\",FORMAT=raw", .inlineDefinition("file:FILE=\"|id>/tmp/proof\",FORMAT=raw")),
        ("file:FILE=|id,FORMAT=raw", .inlineDefinition("file:FILE=|id,FORMAT=raw")),
        ("file:FILE=/home/pi/.bashrc", .inlineDefinition("file:FILE=/home/pi/.bashrc")),
        ("file:'/tmp/x'", .inlineDefinition("file:'/tmp/x'")),
        ("tee:null,/tmp/x,raw", .inlineDefinition("tee:null,/tmp/x,raw")),
        ("tee:null,proof,raw", .writesFiles("tee:null,proof,raw")),
        ("alsa:tee:null,proof,raw", .writesFiles("alsa:tee:null,proof,raw")),
        ("alsa:file:FILE=/tmp/x", .inlineDefinition("alsa:file:FILE=/tmp/x")),
        ("file", .writesFiles("file")), ("tee", .writesFiles("tee")), ("shm:/tmp/s,pcm", .inlineDefinition("shm:/tmp/s,pcm")),
        ("{type file file \"|id\"}", .inlineDefinition("{type file file \"|id\"}")),
        ("{type:file}", .inlineDefinition("{type:file}")),
        ("plug:SLAVE=file", .inlineDefinition("plug:SLAVE=file")),
        ("plug:file", .unknownForm("plug:file")), ("plug:'file:FILE=/x'", .inlineDefinition("plug:'file:FILE=/x'")),
        ("hw:CARD=0,FILE=x", .inlineDefinition("hw:CARD=0,FILE=x")), ("hw:0,0,0,0", .unknownForm("hw:0,0,0,0")),
        ("hw:CARD=0,CARD=1", .inlineDefinition("hw:CARD=0,CARD=1")), ("hw:", .unknownForm("hw:")),
        ("front:0", .unknownForm("front:0")), ("null:x", .unknownForm("null:x")),
        ("cards.pcm.default", .unknownForm("cards.pcm.default")), ("$HOME", .inlineDefinition("$HOME")),
        ("hw:1;0", .inlineDefinition("hw:1;0")), ("pulse:", .badSink("pulse:")), ("pulse:a b", .notPrintable("pulse:a b")),
        ("pulse:../x", .badSink("pulse:../x")), ("pulse:x|y", .inlineDefinition("pulse:x|y")), ("alsa:", .unknownForm("alsa:")),
        ("", .empty), ("   ", .empty), ("hw:1,0\u{7}", .notPrintable("hw:1,0")), ("hdmi\u{202E}", .notPrintable("hdmi")),
        (String(repeating: "a", count: 257), .tooLong),
        ("snapcast:", .badPipe("snapcast:")), ("snapcast:tmp/x", .badPipe("snapcast:tmp/x")),
        ("snapcast:/tmp/../etc/passwd", .badPipe("snapcast:/tmp/../etc/passwd")), ("snapcast:/tmp//x", .badPipe("snapcast:/tmp//x")),
        ("snapcast:/tmp/./x", .badPipe("snapcast:/tmp/./x")), ("snapcast:/tmp/x/", .badPipe("snapcast:/tmp/x/")),
        ("snapcast:/x|y", .inlineDefinition("snapcast:/x|y")), ("snapcast:/a b", .notPrintable("snapcast:/a b")),
        ("snapcast:/x;rm", .badPipe("snapcast:/x;rm")), ("snapcast:/x=1", .badPipe("snapcast:/x=1")),
        ("snapcast:/" + String(repeating: "a", count: 200), .badPipe("snapcast:/" + String(repeating: "a", count: 69) + "…")),
    ]

    @Test("inline definitions, file and command plugins, and anything unknown are refused with the reason")
    func refused() {
        for (text, expected) in Self.refused {
            #expect(throws: expected, "\(text)") { try DeviceName(parsing: text, allowingTestFiles: false) }
        }
    }

    @Test("the tests' file capture is accepted only with the switch, and only as a plain absolute path")
    func testFiles() throws {
        let capture = "file:FILE=/tmp/sm-test/cap.wav,FORMAT=wav"
        #expect(throws: DeviceNameError.self) { try DeviceName(parsing: capture, allowingTestFiles: false) }
        #expect(try DeviceName(parsing: capture, allowingTestFiles: true).form == .testFile)
        #expect(try DeviceName(parsing: "file:FILE=/tmp/x.raw,FORMAT=raw", allowingTestFiles: true).form == .testFile)
        for bad in ["file:FILE=\"|id\",FORMAT=raw", "file:FILE=|id", "file:FILE=relative.wav", "file:FILE=/tmp/x,FORMAT=wav,FORMAT=raw",
                    "file:FILE=/tmp/x,TRUNCATE=0", "file:FILE=/tmp/x,FORMAT=au", "file:FILE='/tmp/x'", "tee:null,/tmp/x,raw"] {
            #expect(throws: DeviceNameError.self, "\(bad)") { try DeviceName(parsing: bad, allowingTestFiles: true) }
        }
        // This test process was not started with the switch.
        #expect(!DeviceName.testFilesAllowed)
        #expect(throws: DeviceNameError.self) { try DeviceName(parsing: capture) }
    }

    @Test("a name decoded from JSON (a stored preset, the socket) goes through the same parser")
    func decoded() throws {
        struct Box: Codable { var device: DeviceName }
        let good = try JSONDecoder().decode(Box.self, from: Data(#"{"device":"plughw:CARD=Headphones,DEV=0"}"#.utf8))
        #expect(good.device.form == .card("plughw:CARD=Headphones,DEV=0"))
        #expect(String(decoding: try JSONEncoder().encode(good), as: UTF8.self) == #"{"device":"plughw:CARD=Headphones,DEV=0"}"#)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(Box.self, from: Data(#"{"device":"file:FILE=\"|id>/tmp/proof\",FORMAT=raw"}"#.utf8))
        }
    }

    @Test("whatever random text is accepted holds nothing ALSA reads as a definition, a file or a command")
    func randomText() {
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("abcdefhilnpstuwxyzACDEFIKLNORSTUVW0129:,=|{}\"'$/\\;. _-@#\n\t")
        let words = ["file", "tee", "shm", "FILE=", "CARD=", "DEV=", "hw:", "plughw:", "alsa:", "pulse:", "SLAVE=", "type", "|", "{"]
        var accepted = 0
        for _ in 0..<50_000 {
            var s = ""
            for _ in 0..<Int.random(in: 0...4, using: &rng) { s += words.randomElement(using: &rng) ?? "" }
            for _ in 0..<Int.random(in: 0...10, using: &rng) { s.append(alphabet.randomElement(using: &rng) ?? "a") }
            guard let name = try? DeviceName(parsing: String(s.shuffled(using: &rng)), allowingTestFiles: false) else { continue }
            accepted += 1
            let t = name.text
            #expect(!t.contains(where: { "{}|\"'$/\\; \t\n".contains($0) }), "\(t)")
            let pcm = (t.hasPrefix("alsa:") ? t.dropFirst(5) : Substring(t)).prefix { $0 != ":" }
            #expect(!["file", "tee", "shm"].contains(pcm), "\(t)")
            for key in t.split(separator: ":").dropFirst().flatMap({ $0.split(separator: ",") }) where key.contains("=") {
                #expect(["CARD", "DEV", "SUBDEV"].contains(String(key.prefix { $0 != "=" })), "\(t)")
            }
        }
        #expect(accepted > 100)
    }
}
