// A session's sounds are counted once when it is built; the voices the render thread makes
// later open them with that count and do not scan the file again.
import Foundation
@testable import StillMomentAudio
import Testing
@testable import StillMomentCore

@Suite("Sounds counted once per session")
struct CountedSoundTests {
    @Test("a voice of an untagged MP3 (a custom ambience) opens with the count, not with a scan to its end")
    func voicesDoNotScan() throws {
        let home = LibraryTempHome()
        // cbr.mp3 without its Info tag, 60 times over: 2,400 frames and no frame count.
        let fixture = LibraryTests.fixture("cbr.mp3")
        let bytes = try [UInt8](LibraryTests.bytes(fixture))
        let probe = try #require(try MPEGProbe.probe(try AudioFile(path: fixture)))
        let body = bytes[(Int(probe.firstFrameOffset) + probe.header.frameLength)...]
        let path = home.path + "/ambience.mp3"
        try Data(Array(repeating: Array(body), count: 60).joined()).write(to: URL(fileURLWithPath: path))

        let counted = try CountedSound(path: path, engineRate: 48000, loop: true)
        let plain = try DecodedSource(path: path, engineRate: 48000, loop: true)
        #expect(counted.fileFrames == plain.decoder.totalFrames && counted.frames == plain.passLength && counted.frames > 0)
        let voice = try counted.source(engineRate: 48000, loop: true)
        #expect(voice.passLength == plain.passLength)
        let voiceReads = try #require(voice.decoder as? MP3Decoder).fileReads
        let plainReads = try #require(plain.decoder as? MP3Decoder).fileReads
        #expect(voiceReads <= 2, "the voice's open read the file \(voiceReads) times")
        #expect(plainReads >= 20, "an open without the count: \(plainReads) reads (the scan)")
    }
}
