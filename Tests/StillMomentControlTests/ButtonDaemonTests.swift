// Buttons in the daemon, in process: a FIFO under a test root stands for the input device
// and carries `struct input_event`s as the kernel writes them. A press starts the action's
// timer, a hold stops it, chatter within 20 ms is one press, and a device that goes away
// (its writer closes, its node is removed) is opened again as soon as its node is back
// (inotify, no timer) and works. (The real kernel, uinput and evdev: the
// sound-card rig.)
import CSystem
import Foundation
import Glibc
import Testing
@testable import StillMomentControl
@testable import StillMomentCore
import StillMomentAudio

@Suite("Buttons in the daemon", .serialized)
struct ButtonDaemonTests {
    /// The device's writer end.
    final class Device {
        let path: String
        var fd: Int32 = -1
        init(_ path: String) { self.path = path }

        func plug() -> Bool {
            fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            return fd >= 0
        }
        func unplug() {
            close(fd)
            fd = -1
        }
        /// Key edges (code 28), each with its time (ms on the monotonic clock) and a SYN.
        func send(_ edges: [(down: Bool, ms: Int64)]) {
            let size = Int(sm_input_event_size())
            var bytes = [UInt8](repeating: 0, count: size * 2 * edges.count)
            bytes.withUnsafeMutableBytes { raw in
                for (i, e) in edges.enumerated() {
                    sm_evdev_encode(raw.baseAddress.map { $0 + 2 * i * size }, 1, 28, e.down ? 1 : 0, e.ms)
                    sm_evdev_encode(raw.baseAddress.map { $0 + (2 * i + 1) * size }, 0, 0, 0, e.ms)
                }
            }
            _ = write(fd, bytes, bytes.count)
        }
    }

    static func setUp() throws -> (Daemon, Device, String) {
        let (daemon, dir) = try DaemonServerTests.daemon()
        let root = dir + "/input"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        mkfifo(root + "/event0", 0o600)
        let button = Button(id: 1, device: try InputDevicePath(root + "/event0", root: root), key: 28,
                            actions: [.press: "timer 24h --preparation off --device null", .hold: "stop"])
        daemon.watchButtons([button])
        return (daemon, Device(root + "/event0"), dir)
    }

    /// Turns the loop until `done` or `seconds` pass.
    static func turn(_ daemon: Daemon, seconds: Double, until done: () -> Bool = { false }) {
        let end = MonotonicClock.seconds() + seconds
        while MonotonicClock.seconds() < end {
            _ = daemon.step(cap: 5)
            if done() { return }
        }
    }

    @Test func pressStartsHoldStopsChatterIsOnePressAndReplugWorks() throws {
        let (daemon, device, dir) = try Self.setUp()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(daemon.buttonsOpen == 1)
        #expect(device.plug())

        // A press (released after 80 ms): the timer starts.
        var t = MonotonicClock.milliseconds()
        device.send([(true, t), (false, t + 80)])
        let sent = MonotonicClock.nanoseconds()
        var startedAt: UInt64 = 0
        Self.turn(daemon, seconds: 5) {
            if daemon.status.session != nil && startedAt == 0 { startedAt = MonotonicClock.nanoseconds() }
            return daemon.status.state == .running
        }
        #expect(daemon.status.state == .running)
        let first = daemon.status.session ?? 0
        print("button press to the session's start: \(Double(startedAt - sent) / 1e6) ms (in process)")
        #expect(Double(startedAt - sent) / 1e6 < 50)

        // A hold: nothing before 1 s, stopped after it.
        t = MonotonicClock.milliseconds()
        device.send([(true, t)])
        Self.turn(daemon, seconds: 0.8)
        #expect(daemon.status.state == .running)
        Self.turn(daemon, seconds: 5) { daemon.status.isIdle }
        #expect(daemon.status.isIdle)
        device.send([(false, MonotonicClock.milliseconds())])
        Self.turn(daemon, seconds: 0.1)
        #expect(daemon.status.isIdle)

        // Chatter: four edges within 20 ms, then the release: one press, one session.
        t = MonotonicClock.milliseconds()
        device.send([(true, t), (false, t + 4), (true, t + 9), (false, t + 14), (true, t + 18), (false, t + 150), (true, t + 155), (false, t + 160)])
        Self.turn(daemon, seconds: 5) { daemon.status.state == .running }
        Self.turn(daemon, seconds: 0.3)
        #expect(daemon.status.state == .running)
        #expect(daemon.status.session == first + 1)

        // Unplugged (the writer goes, the node is removed): closed, and nothing is tried
        // on a timer; plugged again (the node made again): opened at once through inotify,
        // and a press works.
        device.unplug()
        unlink(device.path)
        Self.turn(daemon, seconds: 1) { daemon.buttonsOpen == 0 }
        #expect(daemon.buttonsOpen == 0)
        #expect(daemon.buttonsDue == nil)
        Self.turn(daemon, seconds: 0.3)
        #expect(daemon.buttonsOpen == 0)
        let made = MonotonicClock.nanoseconds()
        mkfifo(device.path, 0o600)
        Self.turn(daemon, seconds: 1) { daemon.buttonsOpen == 1 }
        #expect(daemon.buttonsOpen == 1)
        let back = Double(MonotonicClock.nanoseconds() - made) / 1e6
        print("replugged device opened again after \(back) ms")
        #expect(back < 200)
        #expect(device.plug())
        t = MonotonicClock.milliseconds()
        device.send([(true, t), (false, t + 50)])
        Self.turn(daemon, seconds: 5) { daemon.status.session == first + 2 && daemon.status.state == .running }
        #expect(daemon.status.session == first + 2)
        device.send([(true, MonotonicClock.milliseconds())])
        Self.turn(daemon, seconds: 5) { daemon.status.isIdle }
        #expect(daemon.status.isIdle)
        device.unplug()
    }
}
