// HostileInputTests.swift — crafted M4A and MP3 files: refused in one line or played right, never a trap.
import Foundation
import Glibc
import Testing
@testable import StillMomentAudio

/// The crafted files in Tests/Fixtures/hostile (made by make-hostile.py; README.md there).
enum Hostile {
    static func path(_ name: String) -> String { Fixtures.path("hostile/" + name) }

    enum Outcome: Sendable, CustomStringConvertible {
        /// Opens and decodes to exactly this many frames.
        case plays(frames: Int64, trim: TrimSource)
        /// Refused with this kind of AudioError.
        case refused(String)

        var description: String {
            switch self {
            case .plays(let frames, let trim): return "plays \(frames) frames (\(trim))"
            case .refused(let kind): return "refused (\(kind))"
            }
        }
    }

    /// 45124 untrimmed frames; the fixture's trim keeps 44100 after 1024.
    static let m4a: [(String, Outcome)] = [
        ("smpb-length-max.m4a", .plays(frames: 44100, trim: .iTunSMPB)),   // length 7FFF…: ends with the track
        ("smpb-delay-max.m4a", .refused("corrupt")),                         // skips more than the track
        ("smpb-padding-max.m4a", .plays(frames: 44100, trim: .iTunSMPB)),  // padding 7FFF…, length 0: to the end
        ("smpb-negative.m4a", .plays(frames: 45124, trim: .none)),          // FFFF…FC00: not a delay; tag ignored
        ("smpb-minus-sign.m4a", .plays(frames: 45124, trim: .none)),        // "-400": tag ignored
        ("stts-delta-max-96k.m4a", .refused("corrupt")),                     // frames of 12 hours
        ("stts-overflow.m4a", .refused("corrupt")),                          // durations past UInt64
        ("mdhd-timescale-max.m4a", .refused("corrupt")),                     // 1024/0xFFFFFFFF s per frame
        ("mdhd-timescale-zero.m4a", .refused("corrupt")),
        ("elst-huge-media-time.m4a", .plays(frames: 44100, trim: .iTunSMPB)),  // edit past the end: ignored
        ("elst-huge-segment.m4a", .plays(frames: 44100, trim: .editList)),     // segment UInt64.max at timescale 1
        ("elst-count-max.m4a", .plays(frames: 44100, trim: .iTunSMPB)),       // 4 billion entries claimed
        ("stsz-count-max.m4a", .refused("truncated")),
        ("stsc-per-chunk-max.m4a", .plays(frames: 44100, trim: .iTunSMPB)),
        ("co64-offset-max.m4a", .refused("truncated")),
        ("stsz-entry-max.m4a", .refused("truncated")),
        ("sparse-head.m4a", .refused("truncated")),
    ]

    static func kind(_ error: AudioError) -> String {
        switch error {
        case .truncated: return "truncated"
        case .corrupt: return "corrupt"
        case .unsupportedCodec: return "unsupportedCodec"
        case .noAudio: return "noAudio"
        case .notAudio: return "notAudio"
        default: return "\(error)"
        }
    }
}

@Suite("Hostile input")
struct HostileInputTests {
    @Test("crafted M4A headers are refused in one line or played to the exact length",
          arguments: Hostile.m4a.map(\.0))
    func craftedM4A(_ name: String) throws {
        let outcome = try #require(Hostile.m4a.first { $0.0 == name }).1
        let path = Hostile.path(name)
        do {
            let decoder = try #require(try openDecoder(path: path) as? AACDecoder)
            let samples = try decodeAll(decoder)
            let frames = Int64(samples.count / decoder.format.channels)
            guard case .plays(let expected, let trim) = outcome else {
                Issue.record("\(name) played \(frames) frames; expected \(outcome)")
                return
            }
            #expect(decoder.totalFrames == expected)
            #expect(frames == expected)
            #expect(decoder.track.trimSource == trim)
            try decoder.seek(toFrame: Int64.max)
            try decoder.seek(toFrame: expected / 2)
            #expect(try decodeAll(decoder).count / decoder.format.channels == Int(expected - expected / 2))
        } catch let error as AudioError {
            guard case .refused(let kind) = outcome else {
                Issue.record("\(name): \(error); expected \(outcome)")
                return
            }
            #expect(Hostile.kind(error) == kind, "\(name): \(error)")
            #expect(error.description.hasPrefix(path + ": "))
            #expect(!error.description.contains("\n"))
        }
    }

    @Test("the crafted cases say what is wrong")
    func messages() throws {
        func message(_ name: String) -> String {
            do {
                _ = try openDecoder(path: Hostile.path(name))
                return "opened"
            } catch {
                return error.description
            }
        }
        #expect(message("smpb-delay-max.m4a").contains("iTunSMPB says to skip 9223372036854775807 frames"))
        #expect(message("stts-delta-max-96k.m4a").contains("a duration of 4294967295 at a timescale of 96000"))
        #expect(message("mdhd-timescale-max.m4a").contains("timescale 4294967295"))
        #expect(message("mdhd-timescale-zero.m4a").contains("timescale (mdhd) is 0"))
    }

    @Test("a 256-MiB sparse file of 268 million 1-byte samples opens in constant memory")
    func sparseSampleTable() throws {
        let dir = TempDir()
        let path = dir.file("sparse.m4a")
        try FileManager.default.copyItem(atPath: Hostile.path("sparse-head.m4a"), toPath: path)
        #expect(truncate(path, 256 << 20) == 0)
        let file = try AudioFile(path: path)
        let mp4 = try MP4File(reader: MP4FileReader(file: file))
        let track = mp4.track
        #expect(track.sampleCount > 268_000_000)
        #expect(track.maxSampleSize == 1)
        // The table keeps windows and checkpoints only: nothing per sample.
        #expect(track.tableMemory < 256 << 10, "\(track.tableMemory) bytes")
        let last = try track.sample(at: track.sampleCount - 1)
        #expect(last.offset == (256 << 20) - 1 && last.size == 1)
        let middle = try track.sampleIndex(atTime: track.totalDuration / 2)
        #expect(try track.decodeTime(ofSample: middle) == UInt64(middle) * 1024)
        // Zero bytes are no AAC frame: the decoder refuses it, in one line.
        #expect(throws: AudioError.self) { try openDecoder(path: path) }
    }

    @Test("the streamed sample table answers like a table in memory (many chunks, runs and checkpoints)")
    func streamedTableMatchesModel() throws {
        let model = try SyntheticM4A(seed: 7, samples: 6000)
        let track = try MP4File(reader: MP4MemoryReader(model.bytes)).track
        #expect(track.sampleCount == model.sizes.count)
        #expect(track.totalDuration == model.times.last.map { $0 + UInt64(model.deltas[model.deltas.count - 1]) })
        #expect(track.tableMemory < 256 << 10)
        // In order, then in a scattered order (checkpoints), then backwards.
        var order = Array(0..<model.sizes.count)
        for i in order { #expect(try track.sample(at: i) == (model.offsets[i], model.sizes[i])) }
        var state: UInt64 = 12345
        for i in order.indices.reversed() {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            order.swapAt(i, Int(state >> 33) % (i + 1))
        }
        for i in order.prefix(500) + (0..<model.sizes.count).reversed().prefix(300) {
            #expect(try track.sample(at: i) == (model.offsets[i], model.sizes[i]))
            #expect(try track.decodeTime(ofSample: i) == model.times[i])
            #expect(try track.duration(ofSample: i) == model.deltas[i])
        }
        for i in stride(from: 0, to: model.sizes.count, by: 7) where model.deltas[i] > 0 {
            #expect(try track.sampleIndex(atTime: model.times[i]) == i)
            #expect(try track.sampleIndex(atTime: model.times[i] + UInt64(model.deltas[i]) - 1) == i)
        }
        #expect(try track.sample(at: -1) == (0, 0))
        #expect(try track.sample(at: Int.max) == (0, 0))
        #expect(try track.sampleIndex(atTime: UInt64.max) == track.sampleCount)
        #expect(try track.decodeTime(ofSample: Int.max) == track.totalDuration)
    }

    @Test("128-bit frame arithmetic: no product traps")
    func scaleNeverTraps() {
        #expect(mp4Scale(UInt64.max, UInt64.max, UInt64.max) == UInt64.max)
        #expect(mp4Scale(UInt64.max, 96000, 1) == nil)
        #expect(mp4Scale(1, 1, 0) == nil)
        #expect(mp4Scale(45124, 44100, 0xFFFF_FFFF) == 0)
        #expect(mp4Scale(0x7FFF_FFFF_FFFF_FFFF, 2, 2) == 0x7FFF_FFFF_FFFF_FFFF)
    }

    @Test("every committed fuzz seed demuxes or throws MP4Error")
    func fuzzSeeds() throws {
        let folder = Fixtures.directory + "/../../fuzz/corpus/mp4"
        let names = try FileManager.default.contentsOfDirectory(atPath: folder)
        #expect(names.count >= 7)
        for name in names {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name)))
            do {
                let track = try MP4File(reader: MP4MemoryReader(bytes)).track
                _ = try track.sample(at: track.sampleCount - 1)
            } catch {
                #expect(!"\(error)".contains("\n"))
            }
        }
    }

    @Test("two joined MP3 streams (44.1-kHz stereo, then 22.05-kHz mono): the second half is heard")
    func mp3RateChange() throws {
        let decoder = try openDecoder(path: Hostile.path("rate-change.mp3"))
        #expect(decoder.format == AudioFormat(sampleRate: 44100, channels: 2))
        let samples = try decodeAll(decoder)
        let frames = samples.count / 2
        #expect(decoder.totalFrames == Int64(frames))
        #expect(frames > 44100)  // 0.5 s + 0.5 s, plus the second stream's delay, padding and Info frame
        func rms(_ from: Int, _ to: Int) -> Float {
            let part = samples[(2 * from)..<(2 * to)]
            return (part.reduce(0) { $0 + $1 * $1 } / Float(part.count)).squareRoot()
        }
        #expect(rms(4410, 17640) > 0.3)            // 440 Hz at 0.5: 0.35
        #expect(rms(26460, 39690) > 0.3, "second half: \(rms(26460, 39690))")
        // A seek into the second part lands on sound too.
        try decoder.seek(toFrame: 30000)
        var buffer = [Float](repeating: 0, count: 8192)
        let n = try buffer.withUnsafeMutableBufferPointer { try decoder.read(into: $0.baseAddress!, frames: 4096) }
        #expect(n == 4096)
        #expect(buffer.prefix(2 * n).contains { abs($0) > 0.2 })
    }

    @Test("a single-format MP3 is not taken for joined streams")
    func mp3Regular() throws {
        let scan = try MPEGScan.firstFormatChange(try AudioFile(path: Fixtures.path("vbr.mp3")),
                                                  probe: try #require(try MPEGProbe.probe(try AudioFile(path: Fixtures.path("vbr.mp3")))))
        #expect(scan == nil)
        let file = try AudioFile(path: Hostile.path("rate-change.mp3"))
        let probe = try #require(try MPEGProbe.probe(file))
        #expect(try MPEGScan.continuesAfterXingLength(file, probe: probe))
        let change = try #require(try MPEGScan.firstFormatChange(file, probe: probe))
        #expect(change.from.sampleRate == 44100 && change.from.channels == 2)
        #expect(change.to.sampleRate == 22050 && change.to.channels == 1)
        #expect(abs(change.seconds - 0.55) < 0.1)
    }
}

/// An M4A built in memory around the AAC sample entry of itunsmpb.m4a, with a sample table
/// of many chunks (stsc runs of different lengths, empty chunks), variable sizes and several
/// stts runs; `offsets`, `sizes`, `times` and `deltas` are what the table must answer.
struct SyntheticM4A {
    var bytes: [UInt8] = []
    var offsets: [UInt64] = []
    var sizes: [UInt32] = []
    var times: [UInt64] = []
    var deltas: [UInt32] = []

    init(seed: UInt64, samples: Int) throws {
        var state = seed
        func next(_ bound: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int(state >> 33) % bound
        }
        let template = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("itunsmpb.m4a"))))
        guard let at = Self.find(Array("stsd".utf8), in: template) else { throw CocoaError(.fileReadCorruptFile) }
        let stsdSize = Int(template[at - 4]) << 24 | Int(template[at - 3]) << 16 | Int(template[at - 2]) << 8 | Int(template[at - 1])
        let stsd = Array(template[(at - 4)..<(at - 4 + stsdSize)])

        sizes = (0..<samples).map { _ in UInt32(1 + next(40)) }
        // Chunks of 0 to 30 samples, sometimes repeating a count (one stsc run for several).
        var perChunk: [Int] = []
        var placed = 0
        while placed < samples {
            let count = min(samples - placed, perChunk.last.map { next(3) == 0 ? $0 : next(31) } ?? next(31))
            perChunk.append(count)
            placed += count
        }
        // Durations: runs of 1024, a few 960, the odd 0.
        var time: UInt64 = 0
        var runs: [(UInt32, UInt32)] = []
        while deltas.count < samples {
            let count = min(samples - deltas.count, 1 + next(500))
            let delta: UInt32 = [1024, 1024, 960, 0][next(4)]
            runs.append((UInt32(count), delta))
            for _ in 0..<count {
                times.append(time)
                deltas.append(delta)
                time += UInt64(delta)
            }
        }

        let ftyp = Self.box("ftyp", Array("M4A ".utf8) + [0, 0, 0, 0] + Array("M4A mp42isom".utf8))
        let mdatHeader = 8
        var media: [UInt8] = []
        var chunkOffsets: [UInt64] = []
        var sample = 0
        for count in perChunk {
            media += [UInt8](repeating: 0, count: next(3))  // gaps between chunks
            chunkOffsets.append(UInt64(ftyp.count + mdatHeader + media.count))
            for _ in 0..<count {
                offsets.append(UInt64(ftyp.count + mdatHeader + media.count))
                media += [UInt8](repeating: 0xAB, count: Int(sizes[sample]))
                sample += 1
            }
        }
        var stsc: [(UInt32, UInt32)] = []
        for (index, count) in perChunk.enumerated() where stsc.last?.1 != UInt32(count) {
            stsc.append((UInt32(index + 1), UInt32(count)))
        }
        let stbl = Self.box("stbl", stsd
            + Self.box("stts", Self.u32(0) + Self.u32(UInt32(runs.count)) + runs.flatMap { Self.u32($0.0) + Self.u32($0.1) })
            + Self.box("stsc", Self.u32(0) + Self.u32(UInt32(stsc.count)) + stsc.flatMap { Self.u32($0.0) + Self.u32($0.1) + Self.u32(1) })
            + Self.box("stsz", Self.u32(0) + Self.u32(0) + Self.u32(UInt32(samples)) + sizes.flatMap { Self.u32($0) })
            + Self.box("co64", Self.u32(0) + Self.u32(UInt32(chunkOffsets.count)) + chunkOffsets.flatMap { Self.u32(UInt32($0 >> 32)) + Self.u32(UInt32($0 & 0xFFFF_FFFF)) }))
        let mdhd = Self.box("mdhd", Self.u32(0) + Self.u32(0) + Self.u32(0) + Self.u32(44100) + Self.u32(UInt32(truncatingIfNeeded: time)) + Self.u32(0))
        let hdlr = Self.box("hdlr", Self.u32(0) + Self.u32(0) + Array("soun".utf8) + [UInt8](repeating: 0, count: 13))
        let moov = Self.box("moov", Self.box("trak", Self.box("mdia", mdhd + hdlr + Self.box("minf", stbl))))
        bytes = ftyp + Self.u32(UInt32(mdatHeader + media.count)) + Array("mdat".utf8) + media + moov
    }

    static func u32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        u32(UInt32(8 + payload.count)) + Array(type.utf8) + payload
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        return (0...(haystack.count - needle.count)).first { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }
}
