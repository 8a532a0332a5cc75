// The mixer's seek: which voices of the score it keeps open and which it makes again.
import Synchronization
import Testing
@testable import StillMomentAudio

@Suite("Mixer seek")
struct MixerSeekTests {
    /// Counts the voices an entry made (each opens its source: a decoder, a file).
    final class Made: Sendable {
        let count = Mutex(0)
        func entry(id: Int, start: Int64, end: Int64? = nil) -> ScoreEntry {
            ScoreEntry(id: id, start: start, end: end) { () throws(AudioError) -> Voice in
                self.count.withLock { $0 += 1 }
                return Voice(id: id, source: CountingSource(), start: start, stop: end)
            }
        }
        var value: Int { count.withLock { $0 } }
    }

    /// The source frames (modulo the counting period) and gains of `frames` rendered at `t`.
    func render(_ mixer: Mixer, at t: Int64, frames: Int = 1000) -> [(index: Int64, gain: Float)] {
        var out = [Float](repeating: 0, count: frames * 2)
        out.withUnsafeMutableBufferPointer { buf in
            if let base = buf.baseAddress { mixer.render(into: base, frames: frames, at: t) }
        }
        return CountingSource.recover(out)
    }

    @Test("a seek keeps a voice that sounds at the new position, as made: its source seeks, nothing is reopened")
    func keepsOpenVoice() {
        let made = Made()
        let mixer = Mixer(sampleRate: 44100)
        mixer.schedule(made.entry(id: 1, start: 0, end: 2_000_000))
        #expect(render(mixer, at: 0).first?.index == 0)
        for target: Int64 in [500_000, 20_000, 1_999_000] {
            mixer.seek(to: target)
            let got = render(mixer, at: target)
            #expect(got.first?.index == target % CountingSource.period, "after a seek to \(target)")
            #expect(got.count == 1000 && got.allSatisfy { $0.gain == 1 })
        }
        #expect(made.value == 1, "the voice was made \(made.value) times")
        #expect(mixer.voices.count == 1)
    }

    @Test("a voice faded or stopped since it was made is made again by a seek; one the new position does not reach is dropped")
    func remakesChangedVoice() {
        let made = Made()
        let mixer = Mixer(sampleRate: 44100)
        mixer.schedule(made.entry(id: 1, start: 0))
        mixer.schedule(made.entry(id: 2, start: 100_000, end: 110_000))
        _ = render(mixer, at: 0)
        // Faded out (as a finish does): a seek back must not keep the faded voice.
        mixer.voices.first?.fadeOut(at: 1000, over: 100)
        mixer.seek(to: 5000)
        let back = render(mixer, at: 5000)
        #expect(made.value == 2, "made \(made.value) times")
        #expect(back.first?.index == 5000 % CountingSource.period && back.count == 1000 && back.allSatisfy { $0.gain == 1 })
        // The second entry sounds at 105,000: made there, then dropped by a seek back to 0.
        mixer.seek(to: 105_000)
        _ = render(mixer, at: 105_000)
        #expect(mixer.voices.map(\.id).sorted() == [1, 2])
        #expect(made.value == 3, "made \(made.value) times")
        mixer.seek(to: 0)
        #expect(mixer.voices.map(\.id) == [1])
        #expect(made.value == 3, "the first voice is kept across both seeks")
    }
}
