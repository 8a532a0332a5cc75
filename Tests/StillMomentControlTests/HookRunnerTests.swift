// Hooks run by argv with the session's facts in their environment, their output in the
// daemon's log, a hook that hangs ended with its process group at the timeout, a failing
// one logged once; and the store's one rule of what a hook may be.
import Foundation
import Glibc
import Logging
import Synchronization
import Testing
@testable import StillMomentControl
@testable import StillMomentCore

/// Log lines kept for a test to read.
final class LogCapture: LogHandler, @unchecked Sendable {
    let lines = Mutex<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        lines.withLock { $0.append("\(event.level) \(event.message)") }
    }
    var all: [String] { lines.withLock { $0 } }
}

@Suite("Hooks")
struct HookRunnerTests {
    static func folder() throws -> String {
        let dir = NSTemporaryDirectory() + "sm-hooks-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    static func record() -> SessionRecord {
        SessionRecord(id: "abc", kind: .timer, summary: "20 min", meditationID: nil, teacher: nil, preset: "morning",
                      start: Date(timeIntervalSince1970: 1_800_000_000), utcOffset: 0, plannedMilliseconds: 1_200_000,
                      heardMilliseconds: 754_321, endReason: .finished, rendered: false, scheduled: false)
    }

    @Test func theHookGetsTheFactsInItsEnvironmentAndItsOutputIsLogged() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let capture = LogCapture()
        let runner = HookRunner(hooks: [Hook(id: 1, when: .onEnd, argv: ["/bin/sh", "-c", "env > \"$0\"; echo said; echo 'it; $HOME' ", dir + "/env"]),
                                        Hook(id: 2, when: .onStart, argv: ["/bin/true"])],
                                log: Logger(label: "t") { _ in capture })
        runner.fire(.onEnd, Self.record())
        let end = Date().addingTimeInterval(5)
        while runner.running.load(ordering: .acquiring) > 0 && Date() < end { usleep(10_000) }
        let env = try String(contentsOfFile: dir + "/env", encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(env.contains("STILLMOMENT_EVENT=on-end"))
        #expect(env.contains("STILLMOMENT_KIND=timer"))
        #expect(env.contains("STILLMOMENT_NAME=morning"))
        #expect(env.contains("STILLMOMENT_PRESET=morning"))
        #expect(env.contains("STILLMOMENT_HEARD_SECONDS=754"))
        #expect(env.contains("STILLMOMENT_PLANNED_SECONDS=1200"))
        #expect(env.contains("STILLMOMENT_END_REASON=finished"))
        #expect(env.contains("STILLMOMENT_SESSION_ID=abc"))
        #expect(env.contains("STILLMOMENT_START=1800000000"))
        #expect(env.contains { $0.hasPrefix("PATH=") })          // the daemon's own environment too
        // Its argv is not a shell's: `$HOME` in an argument stays as it is.
        #expect(capture.all.contains { $0.contains("hook 1 (on-end /bin/sh): said") })
        #expect(capture.all.contains { $0.contains("it; $HOME") })
        #expect(capture.all.contains { $0.contains("hook 1 (on-end /bin/sh) done") })
        #expect(!capture.all.contains { $0.contains("hook 2") })  // an on-start hook: not at the end
    }

    @Test func aHookThatHangsIsKilledWithItsGroupAndAFailureIsLogged() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let capture = LogCapture()
        let log = Logger(label: "t") { _ in capture }
        // It starts a child that would write a file after 2 s: killed with it.
        let hang = Hook(id: 7, when: .onEnd, argv: ["/bin/sh", "-c", "(sleep 2; touch \"$0\") & sleep 30", dir + "/late"])
        let runner = HookRunner(hooks: [hang], timeout: 0.5, log: log)
        let t0 = Date()
        runner.run(hang, [:])
        let took = Date().timeIntervalSince(t0)
        #expect(took >= 0.5 && took < 2)
        #expect(capture.all.contains { $0.contains("hook 7 (on-end /bin/sh) ran longer than 0.5 s") })
        sleep(2)
        #expect(access(dir + "/late", F_OK) != 0)

        let failing = Hook(id: 8, when: .onEnd, argv: ["/bin/sh", "-c", "exit 3"])
        runner.run(failing, [:])
        #expect(capture.all.contains { $0.contains("hook 8 (on-end /bin/sh) failed: exit status 3") })
        let missing = Hook(id: 9, when: .onEnd, argv: ["/nonexistent/program"])
        runner.run(missing, [:])
        #expect(capture.all.contains { $0.contains("hook 9 (on-end /nonexistent/program) could not start: No such file or directory") })
    }

    @Test func aHookHoldsNoneOfTheDaemonsDescriptors() throws {
        let capture = LogCapture()
        let runner = HookRunner(hooks: [], log: Logger(label: "t") { _ in capture })
        let kept = dup(2)                      // not close-on-exec, as alsa-lib's may be
        defer { close(kept) }
        runner.run(Hook(id: 3, when: .onStart, argv: ["/bin/ls", "/proc/self/fd"]), [:])
        let listed = capture.all.compactMap { line -> String? in
            guard let r = line.range(of: "hook 3 (on-start /bin/ls): ") else { return nil }
            return String(line[r.upperBound...])
        }
        // ls's own: 0, 1, 2 and the folder it reads.
        #expect(Set(listed).isSubset(of: ["0", "1", "2", "3"]), "\(listed)")
        #expect(!listed.contains(String(kept)) || kept == 3)
    }

    @Test func rendersAndBellsRunNoHooks() throws {
        let capture = LogCapture()
        let runner = HookRunner(hooks: [Hook(id: 1, when: .onEnd, argv: ["/bin/true"])], log: Logger(label: "t") { _ in capture })
        var r = Self.record()
        r.rendered = true
        runner.fire(.onEnd, r)
        r.rendered = false
        r.kind = .bell
        runner.fire(.onEnd, r)
        #expect(runner.running.load(ordering: .acquiring) == 0)
    }

    @Test func theOneRuleOfAHook() {
        #expect(throws: CoreError.self) { try Hook.check([]) }
        #expect(throws: CoreError.self) { try Hook.check(["true"]) }
        #expect(throws: CoreError.self) { try Hook.check(["/bin/echo", "a\nb"]) }
        #expect(throws: CoreError.self) { try Hook.check(["/bin/echo"] + Array(repeating: "x", count: 64)) }
        #expect((try? Hook.check(["/bin/echo", "a b", "$HOME"])) == ["/bin/echo", "a b", "$HOME"])
    }
}
