// ResampledSeekTests.swift — a seek in a file whose rate is not the engine's (a 44.1-kHz
// MP3 on a 48-kHz card, where every pause, resume and seek is one) gives the frames that
// playing through gives, from the first.
import Foundation
import Testing
@testable import StillMomentAudio

struct ResampledSeekTests {
    private static let bell = Fixtures.directory + "/../../Sounds/temple-bell.mp3"

    private func source(_ rate: Int, loop: Bool = false) throws -> DecodedSource {
        try DecodedSource(path: Self.bell, engineRate: rate, loop: loop)
    }

    private func read(_ s: DecodedSource, _ n: Int) throws -> [Float] {
        var out = [Float](repeating: 0, count: 2 * n)
        var done = 0
        while done < n {
            let k = min(1000, n - done)
            let got = try out.withUnsafeMutableBufferPointer { (buf) throws -> Int in
                guard let base = buf.baseAddress else { return 0 }
                return try s.read(into: base + 2 * done, frames: k)
            }
            if got == 0 { break }
            done += got
        }
        return out
    }

    @Test("a seek at 48 and at 32 kHz gives the frames played through, to the sample", arguments: [48000, 32000])
    func seeksExactly(rate: Int) throws {
        let through = try read(try source(rate), 220_000)
        var wrong: [String] = []
        var cases = 0
        for target in [0, 1, 159, 160, 161, 3000, 50_001, 123_457, 199_999] {
            for history in 0..<3 {
                let s = try source(rate)
                // A seek straight after opening, after reading elsewhere, after another seek.
                if history >= 1 { _ = try read(s, 7777) }
                if history == 2 { try s.seek(to: 140_000) }
                try s.seek(to: Int64(target))
                let got = try read(s, 4000)
                var error: Float = 0
                for i in 0..<8000 { error = max(error, abs(got[i] - through[2 * target + i])) }
                cases += 1
                if error > 1e-6 { wrong.append("\(target) after history \(history): \(error)") }
            }
        }
        #expect(cases == 27)
        #expect(wrong.isEmpty, "\(wrong.count) of \(cases): \(wrong.prefix(6))")
    }
}
