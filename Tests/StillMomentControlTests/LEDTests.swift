// The LED on a file tree shaped like sysfs: off when idle, on while sitting, the kernel's
// timer trigger (1 s on, 1 s off) in the preparation and while paused; the setting's names.
import Foundation
import Logging
import Testing
@testable import StillMomentControl
@testable import StillMomentCore

@Suite("LED")
struct LEDTests {
    @Test func looksFollowTheStatus() {
        #expect(LED.look(Status(state: .idle)) == .off)
        #expect(LED.look(Status(state: .preparation)) == .blink)
        #expect(LED.look(Status(state: .starting)) == .blink)
        #expect(LED.look(Status(state: .running)) == .on)
        #expect(LED.look(Status(state: .playing)) == .on)
        var paused = Status(state: .running)
        paused.paused = true
        #expect(LED.look(paused) == .blink)
    }

    @Test func writesTheSysfsFiles() throws {
        let root = NSTemporaryDirectory() + "sm-leds-" + UUID().uuidString
        let folder = root + "/sit"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        for (file, text) in [("brightness", "0\n"), ("max_brightness", "255\n"), ("trigger", "[none] timer heartbeat\n"),
                             ("delay_on", ""), ("delay_off", "")] {
            try text.write(toFile: folder + "/" + file, atomically: false, encoding: .utf8)
        }
        func read(_ f: String) -> String { (try? String(contentsOfFile: folder + "/" + f, encoding: .utf8)) ?? "?" }
        let capture = LogCapture()
        let led = LED(name: "sit", log: Logger(label: "t") { _ in capture }, root: root)
        led.show(.on)
        #expect(read("trigger") == "none" && read("brightness") == "255")
        led.show(.blink)
        #expect(read("trigger") == "timer" && read("delay_on") == "1000" && read("delay_off") == "1000")
        led.show(.off)
        #expect(read("trigger") == "none" && read("brightness") == "0")
        // A missing LED is said once, not on every change.
        let gone = LED(name: "gone", log: Logger(label: "t") { _ in capture }, root: root)
        gone.show(.on)
        gone.show(.off)
        #expect(capture.all.filter { $0.contains("LED: cannot write") }.count == 1)
    }

    @Test func theSettingsNames() throws {
        #expect(try LEDName("").name == nil)
        #expect(try LEDName("led0").name == "led0")
        #expect(try LEDName("sit:green:status").name == "sit:green:status")
        for bad in ["../x", "a/b", ".", "..", "a b", String(repeating: "x", count: 65)] {
            #expect(throws: CoreError.self, "\(bad)") { try LEDName(bad) }
        }
    }
}
