// A loop decoded once into memory (a session rendered to a file) against the same loop
// decoded pass after pass: the same frames to the bit over several passes, read in odd
// block sizes and lent out; a seek wraps as the decoder's does; a resampled or a too long
// file is not taken.
import Testing
@testable import StillMomentAudio

@Suite("A loop from memory")
struct MemoryLoopTests {
    static func frames(_ source: any FrameSource, count: Int, blocks: [Int]) throws -> [Float] {
        var out = [Float](repeating: 0, count: count * 2)
        var got = 0, i = 0
        try out.withUnsafeMutableBufferPointer { buf in
            guard let base = buf.baseAddress else { return }
            while got < count {
                let n = try source.read(into: base + got * 2, frames: min(blocks[i % blocks.count], count - got))
                #expect(n > 0)
                if n == 0 { return }
                got += n
                i += 1
            }
        }
        return out
    }

    @Test(arguments: ["loop-1s.m4a", "loop-1s.mp3"])
    func theSameFramesAsDecodingPassAfterPass(_ name: String) throws {
        let rate = 44100
        let decoded = try DecodedSource(path: Fixtures.path(name), engineRate: rate, loop: true)
        try #require(decoded.isAtEngineRate)
        let pass = try #require(try LoopPass.decode(DecodedSource(path: Fixtures.path(name), engineRate: rate, loop: true),
                                                    maxFrames: Int64(rate) * 120))
        #expect(pass.passLength == decoded.passLength)
        let count = Int(decoded.passLength) * 5 / 2 + 17          // two and a half passes and a bit
        let expected = try Self.frames(decoded, count: count, blocks: [4096])
        #expect(try Self.frames(pass.source(), count: count, blocks: [1, 997, 4096, 333]) == expected)

        // Lent out: the same frames, never across the seam.
        let lent = pass.source()
        var seen: [Float] = []
        while seen.count < count * 2 {
            let part = try #require(try lent.borrow(frames: min(3000, count - seen.count / 2)))
            #expect(!part.isEmpty && part.count <= 3000 * 2)
            seen += part
        }
        #expect(seen == expected)

        // A seek past the end wraps like the decoder's loop.
        let target = decoded.passLength * 3 + 1234
        try decoded.seek(to: target)
        let memory = pass.source()
        try memory.seek(to: target)
        #expect(try Self.frames(memory, count: 5000, blocks: [777]) == Self.frames(decoded, count: 5000, blocks: [5000]))
    }

    @Test func aResampledOrTooLongLoopIsNotTaken() throws {
        let resampled = try DecodedSource(path: Fixtures.path("loop-1s.mp3"), engineRate: 48000, loop: true)
        if !resampled.isAtEngineRate {
            #expect(try LoopPass.decode(resampled, maxFrames: 48000 * 120) == nil)
        }
        let long = try DecodedSource(path: Fixtures.path("loop-1s.m4a"), engineRate: 44100, loop: true)
        #expect(try LoopPass.decode(long, maxFrames: long.passLength - 1) == nil)
        let once = try DecodedSource(path: Fixtures.path("loop-1s.m4a"), engineRate: 44100, loop: false)
        #expect(try LoopPass.decode(once, maxFrames: 44100 * 120) == nil)
    }
}
