import CFileIO
import Foundation
import Glibc
import Testing
@testable import StillMomentAudio

@Suite("Decoders")
struct DecoderTests {
    static let decodable = Fixtures.expected.filter { $0.error == nil }
    static let broken = Fixtures.expected.filter { $0.error != nil }

    @Test("fixtures decode to the exact frame count and match the reference decode",
          arguments: decodable.map(\.file))
    func decodesExactly(_ name: String) throws {
        let entry = try #require(Fixtures.expected.first { $0.file == name })
        let decoder = try openDecoder(path: Fixtures.path(name))
        #expect(decoder.format.sampleRate == entry.sampleRate)
        #expect(decoder.format.channels == entry.channels)
        #expect(decoder.totalFrames == entry.frames.map(Int64.init))
        let samples = try decodeAll(decoder)
        #expect(samples.count / decoder.format.channels == entry.frames)
        let ref = try WAV.read(Fixtures.path(try #require(entry.ref)))
        #expect(ref.frames >= entry.frames ?? 0)
        #expect(ref.channels == decoder.format.channels)
        let n = min(ref.samples.count, samples.count)
        var worst: Float = 0
        for i in 0..<n { worst = max(worst, abs(ref.samples[i] - samples[i])) }
        let tolerance = try #require(entry.tolerance)
        #expect(Double(worst) <= tolerance, "max difference \(worst)")
    }

    @Test("an MP3 without a Xing tag opened with its length known: that length, not a scan; the same samples")
    func knownLength() throws {
        // cbr.mp3 without its first frame (LAME's Info tag): a stream with no frame count.
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: Fixtures.path("cbr.mp3"))))
        let probe = try #require(try MPEGProbe.probe(try AudioFile(path: Fixtures.path("cbr.mp3"))))
        #expect(probe.declaredFrames != nil)
        let start = Int(probe.firstFrameOffset) + probe.header.frameLength
        let dir = TempDir()
        let path = dir.file("untagged.mp3")
        try Data(bytes[start...]).write(to: URL(fileURLWithPath: path))
        #expect(try #require(try MPEGProbe.probe(try AudioFile(path: path))).declaredFrames == nil)

        let scanned = try openDecoder(path: path)
        let frames = try #require(scanned.totalFrames)
        let reference = try decodeAll(scanned)
        #expect(Int64(reference.count / scanned.format.channels) == frames)
        let known = try openDecoder(path: path, knownFrames: frames)
        #expect(known.totalFrames == frames)
        #expect(try decodeAll(known) == reference)
        // Taken as it is (the import counted it): a different count is not scanned over.
        #expect(try openDecoder(path: path, knownFrames: frames - 1000).totalFrames == frames - 1000)
        // A seek lands on the same frames as in the scanned decoder.
        try known.seek(toFrame: frames / 2)
        let tail = try decodeAll(known)
        #expect(tail == Array(reference[(Int(frames / 2) * scanned.format.channels)...]))
    }

    @Test("a far seek in a long MP3 without a tag reads the file a buffer at a time, not two reads a frame")
    func farSeekReads() throws {
        // cbr.mp3's frames without its Info tag, 60 times over: a CBR stream with no frame
        // count and no index, which libmpg123 reads its way through to a far frame.
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: Fixtures.path("cbr.mp3"))))
        let probe = try #require(try MPEGProbe.probe(try AudioFile(path: Fixtures.path("cbr.mp3"))))
        let body = bytes[(Int(probe.firstFrameOffset) + probe.header.frameLength)...]
        let dir = TempDir()
        let path = dir.file("long.mp3")
        try Data(Array(repeating: Array(body), count: 60).joined()).write(to: URL(fileURLWithPath: path))
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let mpegFrames = size / probe.header.frameLength

        let scanned = try openDecoder(path: path)
        let frames = try #require(scanned.totalFrames)
        let reference = try decodeAll(scanned)
        let file = try AudioFile(path: path)
        let decoder = try MP3Decoder(file: file, probe: try #require(try MPEGProbe.probe(file)), knownFrames: frames)
        let before = decoder.fileReads
        try decoder.seek(toFrame: frames - 4410)
        let reads = decoder.fileReads - before
        #expect(reads > 0 && reads <= UInt64(size / Int(SM_READER_BUFFER) + 4),
                "\(reads) reads of the file to pass \(mpegFrames) frames (\(size) bytes)")
        // and it lands where the scanned decoder's samples say
        let tail = try decodeAll(decoder)
        #expect(tail == Array(reference[(Int(frames - 4410) * scanned.format.channels)...]))
    }

    @Test("an MP3's frame index, taken from one decoder that read it all, gives another the same samples after a seek",
          arguments: ["cbr.mp3", "vbr.mp3", "mpeg2-22050-mono.mp3", "mpeg25-8000-mono.mp3", "layer2.mp2"])
    func knownIndex(_ name: String) throws {
        let path = Fixtures.path(name)
        let file = try AudioFile(path: path)
        let probe = try #require(try MPEGProbe.probe(file))
        let first = try MP3Decoder(file: file, probe: probe)
        let reference = try decodeAll(first)
        let index = try #require(first.seekIndex, "\(name): an index once read to the end")
        let frames = try #require(first.totalFrames)
        for target in [frames / 3, frames * 9 / 10] {
            let indexed = try MP3Decoder(file: try AudioFile(path: path), probe: probe, knownFrames: frames, knownIndex: index)
            try indexed.seek(toFrame: target)
            let plain = try MP3Decoder(file: try AudioFile(path: path), probe: probe, knownFrames: frames)
            try plain.seek(toFrame: target)
            let got = try decodeAll(indexed)
            #expect(got == (try decodeAll(plain)), "\(name) from frame \(target): as without the index")
            // Where the decode from the start is (to 1e-7: libmpg123's synthesis of the
            // MPEG-2 and 2.5 fixtures after a seek differs from it in the last bit or so,
            // with or without an index).
            let want = Array(reference[(Int(target) * first.format.channels)...])
            #expect(got.count == want.count && zip(got, want).allSatisfy { abs($0 - $1) <= 1e-6 }, "\(name) from frame \(target)")
        }
    }

    @Test("the file reader reads what the file holds, at any position and size, and stops at its end")
    func reader() throws {
        let dir = TempDir()
        let path = dir.file("bytes.bin")
        var seed: UInt32 = 12345
        let content: [UInt8] = (0..<100_000).map { _ in
            seed = seed &* 1_103_515_245 &+ 12345
            return UInt8(truncatingIfNeeded: seed >> 16)
        }
        try Data(content).write(to: URL(fileURLWithPath: path))
        let file = try AudioFile(path: path)
        let r = try #require(sm_reader_new(file.fd))
        defer { sm_reader_free(r) }
        let handle = UnsafeMutableRawPointer(r)
        var buffer = [UInt8](repeating: 0, count: 40_000)
        func read(_ n: Int) -> [UInt8] {
            let got = buffer.withUnsafeMutableBytes { sm_reader_read(handle, $0.baseAddress, n) }
            return got > 0 ? Array(buffer[0..<got]) : []
        }
        // sizes below, at and above the buffer's, forward and back
        var position = 0
        for (seek, size) in [(0, 4), (4, 417), (421, 16_384), (99_000, 2000), (5, 40_000), (50_000, 3), (16_380, 10)] {
            #expect(sm_reader_lseek(handle, off_t(seek), SEEK_SET) == off_t(seek))
            position = seek
            let got = read(size)
            let want = Array(content[position..<min(position + size, content.count)])
            #expect(got == want, "\(size) bytes at \(seek)")
        }
        #expect(sm_reader_lseek(handle, 0, SEEK_CUR) == 16_390)
        #expect(sm_reader_lseek(handle, -10, SEEK_END) == 99_990)
        #expect(read(100) == Array(content[99_990...]))
        #expect(read(100).isEmpty, "at the end: 0")
        #expect(sm_reader_lseek(handle, 200_000, SEEK_SET) == 200_000)
        #expect(read(10).isEmpty, "past the end: 0")
        #expect(sm_reader_lseek(handle, -1, SEEK_SET) == -1, "before the start: refused")
        #expect(sm_reader_lseek(handle, off_t.max, SEEK_END) == -1, "beyond the largest offset: refused")
    }

    @Test("broken and unsupported files are typed errors", arguments: broken.map(\.file))
    func brokenFiles(_ name: String) throws {
        let entry = try #require(Fixtures.expected.first { $0.file == name })
        let path = Fixtures.path(name)
        do {
            let decoder = try openDecoder(path: path)
            _ = try decodeAll(decoder)
            Issue.record("\(name) opened and decoded without an error")
        } catch let error as AudioError {
            let kind: String
            switch error {
            case .empty: kind = "empty"
            case .notAudio: kind = "notAudio"
            case .truncated: kind = "truncated"
            case .unsupportedCodec: kind = "unsupportedCodec"
            case .corrupt, .noAudio: kind = "corrupt"
            default: kind = "\(error)"
            }
            #expect(kind == entry.error, "\(name): \(error)")
            #expect(error.description.hasPrefix(path))
            #expect(!error.description.contains("\n"))
        }
    }

    @Test("the content decides, not the extension")
    func contentDetection() throws {
        let dir = TempDir()
        let disguised = dir.file("actually-aac.mp3")
        try FileManager.default.copyItem(atPath: Fixtures.path("editlist.m4a"), toPath: disguised)
        let decoder = try openDecoder(path: disguised)
        #expect(decoder is AACDecoder)
        let named = dir.file("actually-mp3.m4a")
        try FileManager.default.copyItem(atPath: Fixtures.path("cbr.mp3"), toPath: named)
        #expect(try openDecoder(path: named) is MP3Decoder)
    }

    @Test("a folder, a FIFO, a dangling link and a missing file are clear errors")
    func notFiles() throws {
        let dir = TempDir()
        #expect(throws: AudioError.notARegularFile(path: dir.path, kind: "folder")) { try openDecoder(path: dir.path) }
        let fifo = dir.file("pipe.mp3")
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(throws: AudioError.notARegularFile(path: fifo, kind: "FIFO (named pipe)")) { try openDecoder(path: fifo) }
        let link = dir.file("gone.mp3")
        #expect(symlink(dir.file("nothing-here"), link) == 0)
        #expect(throws: AudioError.notARegularFile(path: link, kind: "dangling symbolic link")) { try openDecoder(path: link) }
        #expect(throws: AudioError.fileNotFound(path: dir.file("missing.mp3"))) { try openDecoder(path: dir.file("missing.mp3")) }
    }

    @Test("M4A tags and trim sources are read")
    func tags() throws {
        let decoder = try #require(try openDecoder(path: Fixtures.path("editlist.m4a")) as? AACDecoder)
        #expect(decoder.tags.title == "Edit List Test")
        #expect(decoder.tags.artist == "Fixture Artist")
        #expect(decoder.tags.album == "Fixture Album")
        #expect(decoder.tags.albumArtist == "Fixture Album Artist")
        #expect(decoder.track.trimSource == .editList)
        let smpb = try #require(try openDecoder(path: Fixtures.path("itunsmpb.m4a")) as? AACDecoder)
        #expect(smpb.track.trimSource == .iTunSMPB)
        let none = try #require(try openDecoder(path: Fixtures.path("noedit.m4a")) as? AACDecoder)
        #expect(none.track.trimSource == TrimSource.none)
    }

    @Test("seeking lands on the exact frame", arguments: ["cbr.mp3", "vbr.mp3", "editlist.m4a", "moov-at-end.m4a"])
    func seek(_ name: String) throws {
        let all = try decodeAll(try openDecoder(path: Fixtures.path(name)))
        let decoder = try openDecoder(path: Fixtures.path(name))
        let ch = decoder.format.channels
        for target in [0, 1, 1023, 1024, 5000, 20_001] {
            try decoder.seek(toFrame: Int64(target))
            var buf = [Float](repeating: 0, count: 512 * ch)
            let n = try buf.withUnsafeMutableBufferPointer { try decoder.read(into: $0.baseAddress!, frames: 512) }
            #expect(n == 512)
            var worst: Float = 0
            for i in 0..<(n * ch) { worst = max(worst, abs(buf[i] - all[target * ch + i])) }
            // MP3 seeks are sample-exact; AAC restarts one frame early, within rounding.
            #expect(worst < 1e-4, "\(name) at \(target): \(worst)")
        }
    }

    @Test("borrowing gives the frames reading copies, in parts of any size, across seeks",
          arguments: ["cbr.mp3", "vbr.mp3", "editlist.m4a", "moov-at-end.m4a"])
    func borrow(_ name: String) throws {
        let all = try decodeAll(try openDecoder(path: Fixtures.path(name)))
        let decoder = try openDecoder(path: Fixtures.path(name))
        let ch = decoder.format.channels
        let total = all.count / ch
        // From the start to the end in odd part sizes (a frame split across calls), then
        // after seeks into the middle of a frame and back to the start.
        for (target, sizes) in [(0, [1, 700, 3000, 1153]), (5000, [2048, 5, 4096]), (0, [4096])] {
            try decoder.seek(toFrame: Int64(target))
            var got: [Float] = []
            var k = 0
            while true {
                let part = try decoder.borrow(frames: sizes[k % sizes.count])
                k += 1
                if part.isEmpty { break }
                #expect(part.count % ch == 0 && part.count / ch <= sizes[(k - 1) % sizes.count])
                got.append(contentsOf: part)
            }
            #expect(got.count == (total - target) * ch, "\(name) from \(target)")
            let same = got.elementsEqual(all[(target * ch)...])
            // MP3 seeks are sample-exact, AAC restarts one frame early: within rounding.
            let worst = zip(got, all[(target * ch)...]).reduce(Float(0)) { max($0, abs($1.0 - $1.1)) }
            #expect(same || (name.hasSuffix(".m4a") && worst < 1e-4), "\(name) from \(target): \(worst)")
        }
    }
}

@Suite("Sources and the mixer")
struct SourceTests {
    @Test("a 1-s fixture looped 10 times is exactly 10 times its frames, without a seam",
          arguments: ["loop-1s.mp3", "loop-1s.m4a"])
    func loops(_ name: String) throws {
        let once = try decodeAll(try openDecoder(path: Fixtures.path(name)))
        let frames = once.count / 2
        #expect(frames == 44100)
        let inside = maxStep(once, channels: 2)

        let source = try DecodedSource(path: Fixtures.path(name), engineRate: 44100, loop: true)
        #expect(source.passLength == Int64(frames))
        let mixer = Mixer(sampleRate: 44100)
        mixer.add(Voice(id: 1, source: source, start: 0, stop: Int64(10 * frames)))
        var out = [Float](repeating: 0, count: 11 * frames * 2)
        out.withUnsafeMutableBufferPointer { mixer.render(into: $0.baseAddress!, frames: 11 * frames, at: 0) }
        // Exactly ten passes: the frames are the file's frames, and silence after.
        for pass in 0..<10 {
            let base = pass * frames * 2
            let same = out[base..<(base + 2 * frames)].elementsEqual(once)
            #expect(same, "pass \(pass)")
            let seam = pass == 0 ? 0 : maxStep(out, channels: 2, from: pass * frames, to: pass * frames + 1)
            #expect(seam <= inside, "seam \(pass): \(seam) > \(inside)")
        }
        #expect(out[(20 * frames)...].allSatisfy { $0 == 0 })
    }

    @Test("a 22,050-Hz mono file is resampled to exactly twice its frames on both channels")
    func resamples() throws {
        let source = try DecodedSource(path: Fixtures.path("mpeg2-22050-mono.mp3"), engineRate: 44100)
        #expect(source.length == 88200)
        let out = try readAll(source, frames: 100_000)
        #expect(out.count == 88200 * 2)
        var same = true
        var energy: Float = 0
        for i in 0..<88200 {
            same = same && out[2 * i] == out[2 * i + 1]
            energy += out[2 * i] * out[2 * i]
        }
        #expect(same)
        // Same loudness as the original (a resampler changes the rate, not the level).
        let ref = try WAV.read(Fixtures.path("mpeg2-22050-mono.mp3.ref.wav"))
        let refEnergy = ref.samples.reduce(Float(0)) { $0 + $1 * $1 } * 2
        #expect(abs(energy / refEnergy - 1) < 0.02)
    }

    @Test("voices start and stop on their exact frames, with fades")
    func exactPlacement() throws {
        let mixer = Mixer(sampleRate: 44100, maxBlock: 256)
        let counting = CountingSource()
        let voice = Voice(id: 1, source: counting, start: 1001, gain: 1, fadeIn: 100, stop: 5003)
        mixer.add(voice)
        var out = [Float](repeating: 0, count: 6000 * 2)
        // Render in odd-sized blocks: placement must not depend on block boundaries.
        var t = 0
        for size in [333, 777, 1, 2048, 1000, 1841] where t < 6000 {
            let n = min(size, 6000 - t)
            out.withUnsafeMutableBufferPointer { mixer.render(into: $0.baseAddress! + 2 * t, frames: n, at: Int64(t)) }
            t += n
        }
        #expect(out[0..<2002].allSatisfy { $0 == 0 })
        #expect(out[2003] == 0)                       // frame 1001: the fade starts from 0
        #expect(abs(out[2005] - 0.005) < 1e-6)        // frame 1002: gain 1/100
        #expect(abs(out[2 * 1101 + 1] - 0.5) < 1e-6)  // fade-in done at 1101
        #expect(abs(out[2 * 1051 + 1] - 0.25) < 1e-3) // half-way
        #expect(out[2 * 5002 + 1] == 0.5)
        #expect(out[(2 * 5003)...].allSatisfy { $0 == 0 })
        let rec = CountingSource.recover(out)
        #expect(rec.first?.index == 1)
        let contiguous = rec.enumerated().allSatisfy { $0.element.index == Int64($0.offset + 1) }
        #expect(contiguous && rec.count == 4001)
    }

    @Test("the sum never wraps: loud voices are limited softly below 1")
    func softLimit() throws {
        let mixer = Mixer(sampleRate: 44100)
        for id in 0..<8 { mixer.add(Voice(id: id, source: CountingSource(), start: 0, gain: 3)) }
        var out = [Float](repeating: 0, count: 2048 * 2)
        out.withUnsafeMutableBufferPointer { mixer.render(into: $0.baseAddress!, frames: 2048, at: 0) }
        #expect(out.allSatisfy { $0 >= 0 && $0 < 1 })
        #expect(out[1] > 0.95)
    }
}
