// AudioEngine.whenSettled: the daemon's loop sleeps while a session plays and nobody
// follows it, and is woken by the engine when it stops running (a pause, its end, a stop).
// The hook must run at each of those, on its own, without anyone asking for the state.
import Foundation
import Synchronization
import Testing
@_spi(Testing) import StillMomentAudio

@Suite("An engine says when it stops running")
struct SettledTests {
    @Test("a pause, then the end: the hook runs at each, with the state already set")
    func pauseThenEnd() throws {
        let dir = TempDir()
        let engine = try AudioEngine(sampleRate: 44100, sink: .device(DeviceConfiguration(
            name: "file:FILE=\(dir.file("settled.wav")),FORMAT=wav", ringFrames: 8192)))
        let seen = Mutex<[AudioEngine.State]>([])
        engine.whenSettled { [weak engine] in if let engine { seen.withLock { $0.append(engine.state) } } }
        engine.add(Voice(id: 1, source: CountingSource(), start: 0))
        // 30 s of timeline: the file device renders as fast as it can, and the pause must
        // come before the end.
        try engine.start(end: 44100 * 30)
        engine.pause()
        #expect(waitUntil { seen.withLock { $0.contains(.paused) } }, "\(seen.withLock { $0 })")
        engine.resume()
        #expect(waitUntil { seen.withLock { $0.contains(.finished) } }, "\(seen.withLock { $0 })")
        engine.stop()
        let states = seen.withLock { $0 }
        #expect(!states.contains(.running) && !states.contains(.idle), "\(states)")
    }

    /// Polls `condition` for up to 10 s (the hook is what is tested, not this wait).
    private func waitUntil(_ condition: () -> Bool) -> Bool {
        for _ in 0..<1000 {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }
}
