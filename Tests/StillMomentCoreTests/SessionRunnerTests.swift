/// The one runner every session starts and ends through: its record (kind, planned and
/// heard length, end reason) and what happens once at the end (a guided meditation's
/// position saved, never for a render).
import Foundation
import Glibc
import StillMomentAudio
import Synchronization
import Testing
@testable import StillMomentCore

@Suite("Session runner", .serialized)
struct SessionRunnerTests {
    static let sounds = TimerSessionTests.sounds

    func timer(_ options: [String: String], output: SessionOutput) throws -> TimerSession {
        let catalog = try SoundCatalog.load(folder: Self.sounds)
        let c = try TimerConfiguration(settings: Settings(), options: options, catalog: catalog)
        return try TimerSession(configuration: c, catalog: catalog, output: output)
    }

    @Test("a timer that plays to its end is recorded once as completed, with its planned and heard length")
    func completedTimer() throws {
        let dir = TempFolder()
        let records = Mutex<[SessionRecord]>([])
        let session = try timer(["duration": "20s", "preparation": "2s"], output: .device(DeviceConfiguration(name: "null")))
        let runner = try SessionRunner(session) { r in records.withLock { $0.append(r) } }
        session.waitUntilOver(timeout: 60)
        let record = runner.finish()
        runner.finish()
        _ = dir
        #expect(records.withLock { $0.count } == 1)
        #expect(record.kind == .timer && record.endReason == .completed && !record.rendered)
        #expect(record.plannedMilliseconds == 20_000 && record.heardMilliseconds == 20_000)
        #expect(abs(record.start.timeIntervalSinceNow) < 120)
    }

    @Test("a stopped timer records what was heard after the preparation, and why it ended")
    func stoppedTimer() throws {
        let dir = TempFolder()
        let session = try timer(["duration": "10m", "preparation": "1s"], output: .file(path: dir.file("t.wav")))
        let runner = try SessionRunner(session, rendered: true)
        while session.position < Int64(44100 * 31) { usleep(2_000) }
        runner.stop(fade: 0)
        session.waitUntilOver(timeout: 10)
        let record = runner.finish()
        #expect(record.endReason == .stopped && record.rendered)
        #expect(record.heardMilliseconds >= 30_000 && record.heardMilliseconds < 600_000, "\(record.heardMilliseconds)")
    }

    @Test("a guided meditation saves its position when it ends; a render of it does not")
    func guidedPosition() throws {
        let home = TempFolder()
        let store = try LibraryStore(home: home.path)
        guard case .imported(let m) = try Importer(store: store).importFile(GuidedTests.fixtures + "/cbr.mp3") else {
            Issue.record("not imported")
            return
        }
        try store.savePosition(id: m.id, ms: 500)
        let catalog = try SoundCatalog.load(folder: Self.sounds)
        let render = try GuidedSession(meditation: m, store: store, catalog: catalog, output: .file(path: home.file("g.wav")))
        let r1 = try SessionRunner(render, rendered: true)
        render.waitUntilOver(timeout: 30)
        #expect(r1.finish().endReason == .completed)
        #expect(try store.find(m.id).lastPosition == 500, "a render keeps the saved position")

        let played = try GuidedSession(meditation: m, store: store, catalog: catalog,
                                       output: .device(DeviceConfiguration(name: "null")), from: 200)
        let r2 = try SessionRunner(played)
        played.fadeOut(seconds: 0)
        played.waitUntilOver(timeout: 30)
        r2.markEnding(.stopped)
        #expect(r2.finish().endReason == .stopped)
        let saved = try store.find(m.id).lastPosition
        #expect(saved != 500, "the played session saved its own position (\(String(describing: saved)))")
    }

    @Test("the runner's cadence: its turn every 5 s, once; the place kept when it moved, never by a render")
    func cadence() throws {
        let home = TempFolder()
        let store = try LibraryStore(home: home.path)
        guard case .imported(let m) = try Importer(store: store).importFile(GuidedTests.fixtures + "/cbr.mp3") else {
            Issue.record("not imported")
            return
        }
        let catalog = try SoundCatalog.load(folder: Self.sounds)
        let played = try GuidedSession(meditation: m, store: store, catalog: catalog,
                                       output: .device(DeviceConfiguration(name: "null", ringFrames: 4096)), from: 200)
        let made = MonotonicClock.milliseconds()
        let runner = try SessionRunner(played)
        played.pause()
        // The pause is taken up on the engine's threads: wait until the place stands still.
        var last = played.filePosition, still = 0
        for _ in 0..<500 where still < 10 {
            usleep(5_000)
            let now = played.filePosition
            still = now == last ? still + 1 : 0
            last = now
        }
        // The first turn 2 s after the start (before the daemon releases the start's code
        // pages, 3 s in), then one every 5 s.
        #expect(!runner.keepUpDue(now: made + 1_000))
        #expect(runner.keepUpDue(now: made + 2_300))
        #expect(!runner.keepUpDue(now: made + 2_400), "one turn per 5 s")
        #expect(!runner.keepUpDue(now: made + 7_200))
        #expect(runner.keepUpDue(now: made + 7_300))
        try store.savePosition(id: m.id, ms: 1)
        runner.keepUp()
        let first = try store.find(m.id).lastPosition
        #expect(first != nil && first != 1, "the place is kept (\(String(describing: first)))")
        try store.savePosition(id: m.id, ms: 1)
        runner.keepUp()
        #expect(try store.find(m.id).lastPosition == 1, "not moved (paused): nothing written")
        played.fadeOut(seconds: 0)
        played.waitUntilOver(timeout: 30)
        runner.finish()

        let render = try GuidedSession(meditation: m, store: store, catalog: catalog, output: .file(path: home.file("c.wav")))
        let r = try SessionRunner(render, rendered: true)
        try store.savePosition(id: m.id, ms: 7)
        r.keepUp()
        #expect(try store.find(m.id).lastPosition == 7, "a render keeps the saved place")
        render.waitUntilOver(timeout: 30)
        r.finish()
    }
}
