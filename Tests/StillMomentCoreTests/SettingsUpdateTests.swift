// Settings.update: two writers at once (threads here, each with its own lock descriptor as
// two processes would have) each change their own key 100 times; neither change is lost.
import Foundation
import Glibc
import Testing
@testable import StillMomentCore

@Suite("Settings written by two at once")
struct SettingsUpdateTests {
    @Test func twoWritersAtOnceLoseNothing() throws {
        let dir = NSTemporaryDirectory() + "settings-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/settings.json"
        let catalog = try SoundCatalog.bundled()
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: 2) { writer in
            for i in 1...100 {
                do throws(CoreError) {
                    try Settings.update(path: path) { settings throws(CoreError) in
                        if writer == 0 {
                            try settings.set("strikes", "\(i % 9 + 1)", catalog: catalog)
                        } else {
                            try settings.set("duration", "\(i)m", catalog: catalog)
                        }
                    }
                } catch {
                    failures.add(error.description)
                }
            }
        }
        #expect(failures.all.isEmpty)
        let final = try Settings.load(path: path)
        #expect(final.value("strikes") == "\(100 % 9 + 1)")
        #expect(final.value("duration") == "100m")
    }

    final class Failures: @unchecked Sendable {
        private let lock = NSLock()
        private var list: [String] = []
        func add(_ s: String) { lock.lock(); list.append(s); lock.unlock() }
        var all: [String] { lock.lock(); defer { lock.unlock() }; return list }
    }
}
