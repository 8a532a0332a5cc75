import Foundation
import Glibc
import Testing
@testable import StillMomentAudio

/// The committed fixtures (Tests/Fixtures, made by make-fixtures.sh).
enum Fixtures {
    static let directory: String = {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        return here.deletingLastPathComponent().appendingPathComponent("Fixtures").path
    }()

    static func path(_ name: String) -> String { directory + "/" + name }

    struct Entry: Decodable {
        let file: String
        let sampleRate: Int?
        let channels: Int?
        let frames: Int?
        let ref: String?
        let tolerance: Double?
        let error: String?
        let tags: [String: String]?
    }

    static let expected: [Entry] = {
        struct Root: Decodable { let fixtures: [Entry] }
        guard let data = FileManager.default.contents(atPath: path("expected.json")),
              let root = try? JSONDecoder().decode(Root.self, from: data) else { return [] }
        return root.fixtures
    }()
}

/// A WAV file read back: interleaved float samples.
struct WAV {
    var sampleRate = 0
    var channels = 0
    var samples: [Float] = []
    var frames: Int { channels == 0 ? 0 : samples.count / channels }

    /// Reads PCM 16/32-bit or IEEE float WAV. `dataIsFloat` overrides the header (ALSA's
    /// file plugin labels float data as PCM).
    static func read(_ path: String, dataIsFloat: Bool = false) throws -> WAV {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let bytes = [UInt8](data)
        func u16(_ p: Int) -> Int { Int(bytes[p]) | Int(bytes[p + 1]) << 8 }
        func u32(_ p: Int) -> Int { u16(p) | u16(p + 2) << 16 }
        var wav = WAV()
        var format = 0, bits = 0
        var p = 12
        while p + 8 <= bytes.count {
            let id = String(decoding: bytes[p..<p + 4], as: UTF8.self)
            var size = u32(p + 4)
            if id == "fmt " {
                format = u16(p + 8)
                wav.channels = u16(p + 10)
                wav.sampleRate = u32(p + 12)
                bits = u16(p + 22)
            } else if id == "data" {
                if size == 0xFFFF_FFFF || p + 8 + size > bytes.count { size = bytes.count - p - 8 }
                let body = Array(bytes[(p + 8)..<(p + 8 + size)])
                if format == 3 || dataIsFloat {
                    wav.samples = body.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
                } else if bits == 16 {
                    wav.samples = body.withUnsafeBytes { $0.bindMemory(to: Int16.self).map { Float($0) / 32768 } }
                } else if bits == 32 {
                    wav.samples = body.withUnsafeBytes { $0.bindMemory(to: Int32.self).map { Float(Double($0) / 2147483648) } }
                }
                break
            }
            p += 8 + size + (size & 1)
        }
        return wav
    }
}

/// Decodes a whole file into interleaved floats.
func decodeAll(_ decoder: any AudioDecoder, chunk: Int = 1000) throws -> [Float] {
    var out: [Float] = []
    var buf = [Float](repeating: 0, count: chunk * decoder.format.channels)
    while true {
        let n = try buf.withUnsafeMutableBufferPointer { try decoder.read(into: $0.baseAddress!, frames: chunk) }
        if n == 0 { break }
        out.append(contentsOf: buf[0..<(n * decoder.format.channels)])
    }
    return out
}

func readAll(_ source: any FrameSource, frames: Int, chunk: Int = 1000) throws -> [Float] {
    var out: [Float] = []
    var buf = [Float](repeating: 0, count: chunk * 2)
    var left = frames
    while left > 0 {
        let n = try buf.withUnsafeMutableBufferPointer {
            try source.read(into: $0.baseAddress!, frames: min(chunk, left))
        }
        if n == 0 { break }
        out.append(contentsOf: buf[0..<(n * 2)])
        left -= n
    }
    return out
}

/// A temporary folder, removed by `cleanup`.
final class TempDir {
    let path: String
    init() {
        var template = Array((NSTemporaryDirectory() + "/stillmoment-test-XXXXXX").utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = p.map { String(cString: $0) } ?? NSTemporaryDirectory()
    }
    func file(_ name: String) -> String { path + "/" + name }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A source whose left channel counts frames modulo 4096 (value = (index % 4096) / 8192,
/// exact in float) and whose right channel is a constant 0.5: from any output frame,
/// right/0.5 is the gain applied and left/gain recovers which source frame it was
/// (modulo 4096; small values keep the recovery exact even at a ramp's quietest frame).
final class CountingSource: FrameSource {
    static let period: Int64 = 4096
    static let scale: Float = 1.0 / 8192   // below the mixer's soft-limit knee, exact in float
    var position: Int64 = 0
    var length: Int64? { nil }
    func read(into buffer: UnsafeMutablePointer<Float>, frames: Int) throws(AudioError) -> Int {
        for i in 0..<frames {
            buffer[2 * i] = Float((position + Int64(i)) % Self.period) * Self.scale
            buffer[2 * i + 1] = 0.5
        }
        position += Int64(frames)
        return frames
    }
    func seek(to frame: Int64) throws(AudioError) { position = frame }

    /// Recovers the source frame indices (modulo 4096) of the audible frames of an
    /// output stream (interleaved stereo), with the gain of each.
    static func recover(_ samples: [Float]) -> [(index: Int64, gain: Float)] {
        var result: [(Int64, Float)] = []
        for i in 0..<(samples.count / 2) {
            let g = samples[2 * i + 1] / 0.5
            if g <= 0.0001 { continue }
            let idx = Int64((samples[2 * i] / g / scale).rounded())
            result.append((idx, g))
        }
        return result
    }
}

func maxStep(_ samples: [Float], channels: Int, from: Int = 0, to: Int? = nil) -> Float {
    let frames = samples.count / channels
    var best: Float = 0
    for i in max(1, from)..<(to ?? frames) {
        for c in 0..<channels {
            best = max(best, abs(samples[i * channels + c] - samples[(i - 1) * channels + c]))
        }
    }
    return best
}

extension Array where Element == (index: Int64, gain: Float) {
    /// Positions where the count does not go on by one (modulo the period).
    var breaks: [Int] {
        indices.dropFirst().filter { self[$0].index != (self[$0 - 1].index + 1) % CountingSource.period }
    }
}

/// Renders a voice of `cbr.mp3` starting at frame 1000 for 1.5 s through `sink` (the
/// engine tests' and the standby tests' session).
func renderCBR(_ sink: AudioSink) throws -> AudioEngine {
    let engine = try AudioEngine(sampleRate: 44100, sink: sink)
    let source = try DecodedSource(path: Fixtures.path("cbr.mp3"), engineRate: 44100)
    engine.add(Voice(id: 1, source: source, start: 1000, gain: 0.5))
    try engine.start(end: 66150)
    #expect(engine.waitUntilDone(timeout: 20) == .finished)
    #expect(engine.position == 66150)
    return engine
}
