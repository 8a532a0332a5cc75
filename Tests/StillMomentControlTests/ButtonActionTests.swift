// The one parser from an action's text to the typed request (timer options checked by
// Core's parser), the device guard, and key names.
import Foundation
import CSystem
import Glibc
import Testing
@testable import StillMomentControl
@testable import StillMomentCore

@Suite("Button actions and devices")
struct ButtonActionTests {
    @Test func actionsBecomeTheTypedRequests() throws {
        #expect(try ButtonAction(parsing: "timer --preset morning") == .request(.timer(TimerStartRequest(preset: "morning"))))
        #expect(try ButtonAction(parsing: "timer 20m --interval=5m") ==
                .request(.timer(TimerStartRequest(options: ["duration": "20m", "interval": "5m"]))))
        #expect(try ButtonAction(parsing: "pause") == .request(.pause))
        #expect(try ButtonAction(parsing: "resume") == .request(.resume))
        #expect(try ButtonAction(parsing: "finish") == .request(.finish))
        #expect(try ButtonAction(parsing: "stop") == .request(.stop))
        #expect(try ButtonAction(parsing: "ring-now 3") == .request(.ringNow(id: 3)))
        #expect(try ButtonAction(parsing: "play 'body scan'") == .request(.play(PlayRequest(id: "body scan"))))
        #expect(try ButtonAction(parsing: "toggle") == .toggle)
    }

    @Test func badActionsAreRefusedWhenStored() {
        for text in ["", "dance", "stop now", "timer --bogus 3", "timer 99x", "timer --duration", "ring-now x", "timer 1m 2m"] {
            #expect(throws: CoreError.self, "\(text)") { try ButtonAction(parsing: text) }
        }
    }

    @Test func toggleLooksAtTheStatus() {
        var playing = Status(state: .running)
        #expect(ButtonAction.toggle.request(status: playing) == .pause)
        playing.paused = true
        #expect(ButtonAction.toggle.request(status: playing) == .resume)
        var kept = Status(state: .idle)
        #expect(ButtonAction.toggle.request(status: kept) == .pause)
        kept.suspended = .init(id: "x", name: "x", position: 0)
        #expect(ButtonAction.toggle.request(status: kept) == .resume)
    }

    @Test func keyNames() throws {
        #expect(try KeyName.code("KEY_ENTER") == 28)
        #expect(try KeyName.code("enter") == 28)
        #expect(try KeyName.code("KEY_A") == 30)
        #expect(try KeyName.code("KEY_F12") == 88)
        #expect(try KeyName.code("BTN_0") == 256)
        #expect(try KeyName.code("164") == 164)
        #expect(KeyName.name(28) == "KEY_ENTER")
        #expect(KeyName.name(700) == "700")
        #expect(throws: CoreError.self) { try KeyName.code("KEY_NOPE") }
        #expect(throws: CoreError.self) { try KeyName.code("0") }
    }

    @Test func theDeviceGuard() throws {
        // The text: under the root, no `..` or `.`, no control characters.
        for bad in ["/tmp/x", "/dev/input", "/dev/input/../mem", "/dev/input/./event0", "/dev/input//event0",
                    "dev/input/event0", "/dev/input/event0\n", "/dev/inputs/event0"] {
            #expect(throws: CoreError.self, "\(bad)") { try InputDevicePath(bad) }
        }
        #expect(try InputDevicePath("/dev/input/by-path/platform-button@11-event").path == "/dev/input/by-path/platform-button@11-event")
        // What it is: a link out of the root is refused, a file is not a device, a
        // character device passes.
        let root = NSTemporaryDirectory() + "sm-input-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root + "/by-path", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        symlink("/dev/null", root + "/by-path/out")
        _ = FileManager.default.createFile(atPath: root + "/event9", contents: Data())
        symlink("../event9", root + "/by-path/file")
        #expect(throws: CoreError.self) { try InputDevicePath(root + "/by-path/out", root: root).resolve() }
        #expect(throws: CoreError.self) { try InputDevicePath(root + "/by-path/file", root: root).resolve() }
        #expect(throws: CoreError.self) { try InputDevicePath(root + "/missing", root: root).resolve() }
        #expect(try InputDevicePath("/dev/null", root: "/dev").resolve() == "/dev/null")
        // A FIFO only under a test root.
        mkfifo(root + "/fifo", 0o600)
        #expect(try InputDevicePath(root + "/fifo", root: root).resolve().hasSuffix("/fifo"))
    }

    @Test func inputEventsRoundTripThroughTheCLayout() {
        let size = Int(sm_input_event_size())
        #expect(size == 24 || size == 16)
        var bytes = [UInt8](repeating: 0, count: size * 3)
        bytes.withUnsafeMutableBytes { raw in
            sm_evdev_encode(raw.baseAddress, 4, 4, 458_792, 1_000)           // EV_MSC: not a key
            sm_evdev_encode(raw.baseAddress.map { $0 + size }, 1, 28, 1, 123_456)
            sm_evdev_encode(raw.baseAddress.map { $0 + 2 * size }, 1, 28, 0, 123_789)
        }
        var events = [sm_key_event](repeating: sm_key_event(), count: 8)
        // A partial event at the end is not read.
        let n = Int(sm_evdev_decode(bytes, Int32(bytes.count - 1), &events, 8))
        #expect(n == 1)
        #expect(events[0].code == 28 && events[0].value == 1 && events[0].ms == 123_456)
        #expect(Int(sm_evdev_decode(bytes, Int32(bytes.count), &events, 8)) == 2)
        #expect(events[1].value == 0 && events[1].ms == 123_789)
    }
}
