// output-standby in the engine: a device kept open at an engine's close is taken over by
// the next engine on the same device (its timeline and counters start afresh), and one on
// another device closes it first.
import CAudio
import Foundation
import Testing
@testable import StillMomentAudio

@Suite("Standby", .serialized)
struct StandbyTests {
    func session(_ device: String, _ standby: Standby?) throws -> AudioEngine {
        try renderCBR(.device(DeviceConfiguration(name: device, standby: standby)))
    }

    @Test("a device kept open is taken over by the next session, which plays exactly what it rendered")
    func takeOver() throws {
        let standby = Standby()
        defer { standby.release() }
        let dir = TempDir()
        let reference = dir.file("ref.wav")
        try renderCBR(.file(path: reference, format: .float32)).stop()

        let captured = dir.file("kept.wav")
        let device = "file:FILE=\(captured),FORMAT=wav"
        standby.keepsOpen = true
        let first = try session(device, standby)
        first.stop()
        #expect(standby.heldDevice?.name == device)
        #expect(standby.heldDevice?.failed == false)

        let second = try session(device, standby)
        #expect(standby.heldDevice == nil)          // taken over, not opened again
        let stats = try #require(second.statistics)
        #expect(stats.xruns == 0 && stats.silenceEvents == 0)
        #expect(stats.framesWritten >= 66150 && stats.framesWritten < 2 * 66150)   // its own share only
        second.stop()
        #expect(standby.heldDevice?.name == device)

        // Another device: the held one is closed first.
        let other = try session("null", standby)
        #expect(standby.heldDevice == nil)
        standby.keepsOpen = false
        other.stop()
        #expect(standby.heldDevice == nil)

        // Both sessions went to the one open device, one after the other, each exactly.
        let a = try WAV.read(reference)
        let b = try WAV.read(captured, dataIsFloat: true)
        let n = a.samples.count
        #expect(b.samples.count >= 2 * n)
        if b.samples.count >= 2 * n {
            #expect(a.samples.elementsEqual(b.samples[0..<n]))
            let rest = Array(b.samples[n...])
            let start = rest.firstIndex { $0 != 0 } ?? 0
            let lead = a.samples.firstIndex { $0 != 0 } ?? 0
            #expect(start >= lead)
            let from = start - lead
            #expect(rest.count >= from + n)
            if rest.count >= from + n { #expect(a.samples.elementsEqual(rest[from..<(from + n)])) }
        }
    }

    @Test("with keep-open off an engine's device is closed as before")
    func closedWhenNotKept() throws {
        let standby = Standby()
        let engine = try session("null", standby)
        engine.stop()
        #expect(standby.heldDevice == nil)
    }
}
