import CAudio
import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing
@testable import StillMomentAudio

/// A named pipe read at a steady pace, for ALSA's `file:` device: the output thread's
/// writes block on it as on a sound card, so a session's last second lasts long enough
/// for a command to land in the drain (on `null` it is over in microseconds).
final class PacedPipe: @unchecked Sendable {
    let path: String
    private let fd: Int32
    private let bytes = Mutex<[UInt8]>([])
    private let stopping = Atomic<Bool>(false)
    private let ended = DispatchSemaphore(value: 0)

    init(path: String, framesPerSecond: Int) throws {
        self.path = path
        guard mkfifo(path, 0o600) == 0 else { throw POSIXError(.EEXIST) }
        // Read and write: the open does not wait for the device, and the pipe never ends.
        fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        let bytesPerSecond = Double(framesPerSecond * 8)
        Thread.detachNewThread { [self] in self.run(bytesPerSecond: bytesPerSecond) }
    }

    private func run(bytesPerSecond: Double) {
        var buffer = [UInt8](repeating: 0, count: 8192)
        var total = 0
        let start = DispatchTime.now().uptimeNanoseconds
        while !stopping.load(ordering: .acquiring) {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 20) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { continue }
            bytes.withLock { $0.append(contentsOf: buffer[0..<n]) }
            total += n
            let due = Double(total) / bytesPerSecond
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            if due > elapsed { usleep(UInt32((due - elapsed) * 1e6)) }
        }
        _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            bytes.withLock { $0.append(contentsOf: buffer[0..<n]) }
        }
        ended.signal()
    }

    /// Stops reading (after the device was closed) and returns the float samples.
    func finish() -> [Float] {
        stopping.store(true, ordering: .releasing)
        ended.wait()
        close(fd)
        let data = bytes.withLock { $0 }
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self).prefix(data.count / 4)) }
    }
}

/// Opened from the test thread; the source waits for it on the render thread.
final class Gate: Sendable {
    private let isOpen = Atomic<Bool>(false)
    func open() { isOpen.store(true, ordering: .releasing) }
    /// Waits until open (at most 10 s, so that a failing test cannot hang).
    func pass() {
        for _ in 0..<10_000 where !isOpen.load(ordering: .acquiring) { usleep(1000) }
    }
}

/// CountingSource's stream, whose reads from `gateFrame` on wait for the gate: the render
/// thread is held there while the output thread plays out what it has.
final class GatedCountingSource: FrameSource {
    private let inner = CountingSource()
    private let gateFrame: Int64
    private let gate: Gate
    init(gateFrame: Int64, gate: Gate) {
        self.gateFrame = gateFrame
        self.gate = gate
    }
    var length: Int64? { nil }
    func read(into buffer: UnsafeMutablePointer<Float>, frames: Int) throws(AudioError) -> Int {
        if inner.position >= gateFrame { gate.pass() }
        return try inner.read(into: buffer, frames: frames)
    }
    func seek(to frame: Int64) throws(AudioError) { try inner.seek(to: frame) }
}

/// Issue 11: a seek back (or a pause, a fade, a later end) while the session's end is
/// draining must not leave the output stopped with the render thread running: before the
/// fix the session froze where it was and the real-time output thread spun.
@Suite("Seek at the end", .serialized)
struct SeekAtEndTests {
    static let rate = 44100
    /// The session's end: 3 s, of which the ring (1 s, 65,536 frames) holds the last part.
    static let end: Int64 = 132_300

    func waitFor(_ engine: AudioEngine, frame: Int64, timeout: Double = 10) -> Bool {
        let deadline = DispatchTime.now() + timeout
        while engine.position < frame {
            if DispatchTime.now() >= deadline { return false }
            usleep(500)
        }
        return true
    }

    /// Plays `source` to `end` on the `file:` device through a pipe read at four times
    /// real time, runs `body` and returns the captured stream.
    func pacedSession(_ source: sending any FrameSource, _ body: (AudioEngine) -> Void) throws -> [Float] {
        let dir = TempDir()
        let pipe = try PacedPipe(path: dir.file("device.fifo"), framesPerSecond: 4 * Self.rate)
        do {
            let device = DeviceConfiguration(name: "file:FILE=\(pipe.path),FORMAT=raw", realtime: false)
            let engine = try AudioEngine(sampleRate: Self.rate, sink: .device(device))
            engine.add(Voice(id: 1, source: source, start: 0))
            try engine.start(end: Self.end)
            body(engine)
            engine.stop()
        } catch {
            _ = pipe.finish()
            throw error
        }
        return pipe.finish()
    }

    @Test("a seek back while the end drains plays on from there to the end, exactly once")
    func seekDuringDrain() throws {
        let target: Int64 = 20_000
        let samples = try pacedSession(CountingSource()) { engine in
            // The render thread reached the end long ago (the ring holds 65,536 frames):
            // the output thread is draining the last 20,000.
            #expect(waitFor(engine, frame: Self.end - 20_000))
            engine.seek(to: target)
            #expect(engine.state == .running)
            #expect(engine.waitUntilDone(timeout: 10) == .finished)
            #expect(engine.position == Self.end)
        }
        let rec = CountingSource.recover(samples)
        let jumps = rec.breaks
        try #require(jumps.count == 1, "jumps at \(jumps.prefix(4).map { (rec[$0 - 1].index, rec[$0].index) })")
        #expect(rec[jumps[0]].index == target % CountingSource.period)
        #expect(rec.count - jumps[0] == Int(Self.end - target), "frames after the seek")
        #expect(rec.last?.index == (Self.end - 1) % CountingSource.period)
    }

    @Test("a pause while the end drains, then resume: every frame once, and the end")
    func pauseDuringDrain() throws {
        let samples = try pacedSession(CountingSource()) { engine in
            #expect(waitFor(engine, frame: Self.end - 20_000))
            engine.pause()
            #expect(engine.state == .paused)
            let p = engine.position
            #expect(p < Self.end)
            usleep(20_000)
            #expect(engine.position == p)
            engine.resume()
            #expect(engine.waitUntilDone(timeout: 10) == .finished)
            #expect(engine.position == Self.end)
        }
        let rec = CountingSource.recover(samples)
        #expect(rec.breaks.isEmpty, "breaks at \(rec.breaks.prefix(4))")
        #expect(rec.count == Int(Self.end))
    }

    @Test("a fade while the end drains ends where it fell silent; a seek back then plays to the end")
    func fadeDuringDrainThenSeek() throws {
        let target: Int64 = 20_000
        let samples = try pacedSession(CountingSource()) { engine in
            #expect(waitFor(engine, frame: Self.end - 30_000))
            engine.fadeOutAndFinish(over: Int64(Self.rate / 20))
            #expect(engine.waitUntilDone(timeout: 10) == .finished)
            let p = engine.position
            #expect(p > Self.end - 30_000 && p < Self.end, "faded out at \(p)")
            // A finished engine still takes a seek back.
            engine.seek(to: target)
            #expect(engine.state == .running)
            #expect(engine.waitUntilDone(timeout: 10) == .finished)
            #expect(engine.position == Self.end)
        }
        let rec = CountingSource.recover(samples)
        let jumps = rec.breaks
        try #require(jumps.count == 1, "jumps at \(jumps.prefix(4).map { (rec[$0 - 1].index, rec[$0].index) })")
        #expect(rec[jumps[0]].index == target % CountingSource.period)
        #expect(rec.count - jumps[0] == Int(Self.end - target))
    }

    @Test("a later end set while the end drains plays on, even after the device drained")
    func laterEndDuringDrain() throws {
        let gate = Gate()
        let later = Self.end + Int64(Self.rate)
        let samples = try pacedSession(GatedCountingSource(gateFrame: Self.end, gate: gate)) { engine in
            #expect(waitFor(engine, frame: Self.end - 20_000))
            // The render thread goes on past the old end and waits at the gate, while the
            // output thread plays out what it has and drains the device.
            engine.setEnd(later)
            #expect(waitFor(engine, frame: Self.end))
            usleep(50_000)
            #expect(engine.state == .running)
            gate.open()
            #expect(engine.waitUntilDone(timeout: 10) == .finished)
            #expect(engine.position == later)
        }
        let rec = CountingSource.recover(samples)
        #expect(rec.breaks.isEmpty, "breaks at \(rec.breaks.prefix(4))")
        #expect(rec.count == Int(later))
    }

    @Test("on the null device a seek back at any moment of the end plays on to the end")
    func seekAroundTheEndOnNull() throws {
        let end: Int64 = 30_000
        for i in 0..<60 {
            let device = DeviceConfiguration(name: "null", realtime: false)
            let engine = try AudioEngine(sampleRate: Self.rate, sink: .device(device))
            engine.add(Voice(id: 1, source: CountingSource(), start: 0))
            try engine.start(end: end)
            // From before the end to after it: the seek lands while the render thread
            // fills the ring, while the end drains, as it completes, or after it.
            let spin = DispatchTime.now().uptimeNanoseconds + UInt64(i % 20) * 150_000
            while DispatchTime.now().uptimeNanoseconds < spin {}
            engine.seek(to: 5_000)
            let state = engine.waitUntilDone(timeout: 5)
            #expect(state == .finished, "run \(i): \(state) at \(engine.position)")
            #expect(engine.position == end, "run \(i)")
            // And once more after the end (a finished engine takes a seek back).
            engine.seek(to: end - 1_000)
            #expect(engine.waitUntilDone(timeout: 5) == .finished)
            #expect(engine.position == end)
            engine.stop()
            if state != .finished { break }
        }
    }

    @Test("a seek right after the start is done when it returns: the position read next is the new one")
    func seekRightAfterStart() throws {
        // Before, a seek made before the render thread had first run only queued, and the
        // daemon computed the next relative seek from the old position (a seek back after
        // a seek to the end then went to 0:00 on a busy machine).
        let end: Int64 = Int64(Self.rate) * 600
        let target = end - Int64(Self.rate)
        for i in 0..<100 {
            let engine = try AudioEngine(sampleRate: Self.rate, sink: .device(DeviceConfiguration(name: "null", realtime: false)))
            engine.add(Voice(id: 1, source: CountingSource(), start: 0))
            try engine.start(end: end)
            engine.seek(to: target)
            let at = engine.position
            #expect(at >= target, "run \(i): at \(at) after a seek to \(target)")
            engine.stop()
            if at < target { break }
        }
    }
}
