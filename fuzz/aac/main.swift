// libFuzzer harness for the AAC decoder's set-up on what the MP4 demuxer returns
// (Sources/StillMomentAudio/AACDecoder.swift + MP4Demuxer.swift, with libfaad2). Built by
// fuzz/run.sh together with the real sources (one module, nothing added to Sources/).
//
// The input is written to a memfd (an anonymous in-memory file reached through
// /proc/self/fd/N) and opened as an AACDecoder: demuxing, the trim arithmetic (edit list,
// iTunSMPB, timescales, rate factor), libfaad2's configuration and first frame. When it
// opens, a few reads and seeks (0, the middle, the end, past both ends) run. It must throw
// AudioError or work; never trap, hang or allocate with a declared size.

import Glibc

@inline(never)
func consume<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

private var buffer = [Float](repeating: 0, count: 4096 * 8)

/// Reads at most `frames` frames in a few calls.
private func readSome(_ decoder: AACDecoder, frames: Int) throws(AudioError) {
    var left = frames
    while left > 0 {
        let n = try buffer.withStorage { (buf) throws(AudioError) -> Int in
            guard let base = buf.baseAddress else { return 0 }
            return try decoder.read(into: base, frames: min(left, 4096))
        }
        if n == 0 { return }
        left -= n
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    store(data, size)
    do {
        let decoder = try AACDecoder(file: try AudioFile(path: memfdPath))
        let total = decoder.totalFrames ?? 0
        precondition(total >= 0, "negative length \(total)")
        precondition(decoder.track.tableMemory <= 1 << 20, "the sample table holds \(decoder.track.tableMemory) bytes")
        consume((decoder.format, decoder.tags.title, decoder.track.priming, decoder.track.validDuration))
        try readSome(decoder, frames: 8192)
        for target in [total / 2, total &- 100, total, Int64.max, Int64.min, -1, 0] {
            try decoder.seek(toFrame: target)
            try readSome(decoder, frames: 2048)
        }
    } catch {
        consume(error.description)  // every error message must render too
    }
    return 0
}
