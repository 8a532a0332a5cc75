// A session's sounds are counted once when it is built; the voices the render thread makes
// later open them with that count and do not scan the file again.
import Foundation
@testable import StillMomentAudio
import Testing
@testable import StillMomentCore

@Suite("Sounds counted once per session")
struct CountedSoundTests {
    /// cbr.mp3 without its Info tag, 60 times over: 2,400 frames and no frame count.
    static func untaggedMP3(in home: LibraryTempHome) throws -> String {
        let fixture = LibraryTests.fixture("cbr.mp3")
        let bytes = try [UInt8](LibraryTests.bytes(fixture))
        let probe = try #require(try MPEGProbe.probe(try AudioFile(path: fixture)))
        let body = bytes[(Int(probe.firstFrameOffset) + probe.header.frameLength)...]
        let path = home.path + "/ambience.mp3"
        try Data(Array(repeating: Array(body), count: 60).joined()).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("a voice of an untagged MP3 (a custom ambience) opens with the count, not with a scan to its end")
    func voicesDoNotScan() throws {
        let home = LibraryTempHome()
        let path = try Self.untaggedMP3(in: home)

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

    @Test("an imported sound's length is stored and given to the session; a damaged or older one is none, and can be counted again")
    func importedSoundLength() throws {
        let home = LibraryTempHome()
        let (store, importer) = try LibraryTests.fresh(home)
        let path = try Self.untaggedMP3(in: home)
        let sound = try importer.importSound(path, kind: .ambience, name: "Long Rain", catalog: try SoundCatalog.bundled())
        let counted = try CountedSound(path: path, engineRate: 44100)
        let frames = try #require(counted.fileFrames)
        #expect(store.soundLengths()[sound.storedFile] == frames)
        let entry = try #require(try SoundCatalog.withCustomSounds(store: store).sounds.first { $0.id == sound.id })
        #expect(entry.frames == frames)
        // A session's count with it reads the file once or twice, not to its end.
        let opened = try CountedSound(path: try #require(entry.filename), engineRate: 44100, loop: true, knownFrames: entry.frames)
        #expect(opened.frames == counted.frames)
        let source = try DecodedSource(path: try #require(entry.filename), engineRate: 44100, knownFrames: entry.frames)
        #expect(try #require(source.decoder as? MP3Decoder).fileReads <= 2)

        // Values a hand edit or a damaged catalog could hold: no length, no crash, the sound still there.
        for value in ["'abc'", "1.5", "x'00'", "-5", "0", "9223372036854775807"] {
            try store.write { db in try db.execute(sql: "UPDATE customSound SET frames = \(value) WHERE id = ?", arguments: [sound.id]) }
            let again = try SoundCatalog.withCustomSounds(store: store).sounds.first { $0.id == sound.id }
            #expect(again != nil && again?.frames == nil, "frames = \(value)")
        }
        // Imported before it was kept: counted again (the daemon does it when idle); a count
        // of a file the row no longer holds (deleted and imported again under the name
        // meanwhile) is not stored on it.
        try store.write { db in try db.execute(sql: "UPDATE customSound SET frames = NULL") }
        var replaced = sound
        replaced.storedFile = "00000000-0000-4000-8000-000000000000.mp3"
        try Data(contentsOf: URL(fileURLWithPath: store.soundsFolder + "/" + sound.storedFile))
            .write(to: URL(fileURLWithPath: store.soundsFolder + "/" + replaced.storedFile))
        #expect(try store.storeLength(of: replaced) == false)
        #expect(store.soundLengths().isEmpty)
        #expect(try store.uncountedSounds().map(\.id) == [sound.id])
        #expect(try store.storeLength(of: sound))
        let left = try store.uncountedSounds()
        #expect(store.soundLengths()[sound.storedFile] == frames && left.isEmpty)
    }
}
