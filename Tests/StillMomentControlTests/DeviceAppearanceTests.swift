// DeviceAppearance on a real inotify: a device's by-path folder that does not exist yet is
// waited for through its parent, then the node in it; nothing is held when no device is
// away; the nearest existing folder and a missing node (a link to nothing) are found.
import Foundation
import Glibc
import Testing
@testable import StillMomentControl

@Suite("Waiting for a device's node")
struct DeviceAppearanceTests {
    static func readable(_ fd: Int32, within ms: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, ms) == 1
    }

    @Test func aFolderThenTheNodeInItAreSeenAndNothingIsHeldWhenNoneIsAway() throws {
        let root = NSTemporaryDirectory() + "appear-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let device = root + "/by-path/platform-gpio-keys-event"
        let appearance = DeviceAppearance()
        #expect(DeviceAppearance.nearestFolder(of: device) == root)
        #expect(DeviceAppearance.nodeMissing(device))

        #expect(appearance.wait(for: [device], roots: [root]))
        #expect(appearance.fd >= 0)
        #expect(!Self.readable(appearance.fd, within: 50))
        mkdir(root + "/by-path", 0o755)
        #expect(Self.readable(appearance.fd, within: 1000))
        appearance.drain()
        #expect(!Self.readable(appearance.fd, within: 0))

        // Looked at again: now the by-path folder itself is watched.
        #expect(appearance.wait(for: [device], roots: [root]))
        #expect(DeviceAppearance.nearestFolder(of: device) == root + "/by-path")
        symlink("../event7", device)                       // a link to nothing yet
        #expect(Self.readable(appearance.fd, within: 1000))
        #expect(DeviceAppearance.nodeMissing(device))
        appearance.drain()
        #expect(appearance.wait(for: [device], roots: [root]))
        mkfifo(root + "/event7", 0o600)                     // its target made in the root
        #expect(Self.readable(appearance.fd, within: 1000))
        #expect(!DeviceAppearance.nodeMissing(device))

        #expect(appearance.wait(for: [], roots: [root]))
        #expect(appearance.fd == -1)
    }
}
