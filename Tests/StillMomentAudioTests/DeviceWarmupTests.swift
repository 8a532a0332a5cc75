// DeviceWarmup: what the first open of a device needs, loaded ahead on a thread of its
// own. An open right after it waits for it (never two expansions of ALSA's configuration
// at once) and plays exactly; a name that resolves to nothing says so at its open, not
// at the warm-up.
import Foundation
import Testing
@testable import StillMomentAudio

@Suite("Device warm-up", .serialized)
struct DeviceWarmupTests {
    @Test("engines opened right after a warm-up, of the same name or another, play exactly what they render")
    func opensAfterWarmup() throws {
        let dir = TempDir()
        let reference = dir.file("ref.wav")
        try renderCBR(.file(path: reference, format: .float32)).stop()
        let expected = try WAV.read(reference).samples
        #expect(expected.count >= 2 * 66150)
        for (i, name) in ["null", "alsa:null", "pulse:no-such-sink", "", "file:FILE=/dev/null"].enumerated() {
            #expect(DeviceWarmup.begin(device: name))
            let captured = dir.file("after-\(i).wav")
            let engine = try renderCBR(.device(DeviceConfiguration(name: "file:FILE=\(captured),FORMAT=wav")))
            engine.stop()
            #expect(try WAV.read(captured, dataIsFloat: true).samples.prefix(expected.count).elementsEqual(expected),
                    "after warming \(name)")
        }
    }

    @Test("several warm-ups at once, then an open: nothing is lost or reported early, and finish waits for them")
    func concurrentWarmups() throws {
        for _ in 0..<8 { #expect(DeviceWarmup.begin(device: "null")) }
        for _ in 0..<4 { #expect(DeviceWarmup.begin(device: "no-such-pcm-\(getpid())")) }
        let engine = try renderCBR(.device(DeviceConfiguration(name: "null")))
        engine.stop()
        #expect(DeviceWarmup.finish(milliseconds: 0))      // the open waited for them all
        for _ in 0..<4 { #expect(DeviceWarmup.begin(device: "pulse")) }
        #expect(DeviceWarmup.finish(milliseconds: 10_000))  // what a daemon's exit waits for
        #expect(DeviceWarmup.finish(milliseconds: -5))
    }

    @Test("a name that resolves to nothing: the warm-up is silent, the open says which device and why")
    func unknownName() {
        let name = "no-such-pcm-\(getpid())"
        #expect(DeviceWarmup.begin(device: name))
        do {
            let engine = try AudioEngine(sampleRate: 44100, sink: .device(DeviceConfiguration(name: name)))
            try engine.start(end: 4410)
            Issue.record("\(name) opened")
            engine.stop()
        } catch {
            #expect("\(error)".contains(name), "\(error)")
        }
    }
}
