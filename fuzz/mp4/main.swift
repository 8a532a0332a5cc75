// libFuzzer harness for the MP4/M4A demuxer (Sources/StillMomentAudio/MP4Demuxer.swift).
// Built by fuzz/run.sh: the real source file is compiled together with this one into a
// single module, so internal API is reachable and nothing is added to Sources/.
//
// Any input must either throw MP4Error or parse; a parsed track's accessors must be
// total (no trap) for any index or time, including out-of-range ones, and the sample table
// must stay small (`tableMemory` bounded, whatever the declared counts).

@inline(never)
func consume<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

func exercise(_ track: MP4AudioTrack) throws(MP4Error) {
    let n = track.sampleCount
    var indices: [Int] = [Int.min, -1, 0, 1, n / 2, n - 2, n - 1, n, n + 1, Int.max]
    // A handful of consecutive samples at each end.
    for i in 0..<min(n, 8) { indices.append(i); indices.append(n - 1 - i) }
    for i in indices {
        consume(try track.sample(at: i))
        consume(try track.duration(ofSample: i))
        consume(try track.decodeTime(ofSample: i))
    }
    let total = track.totalDuration
    let times: [UInt64] = [0, 1, total / 3, total / 2, total &- 1, total, total &+ 1, UInt64.max]
    for t in times {
        let i = try track.sampleIndex(atTime: t)
        // Feed the answer back: it must be a valid or one-past-the-end index.
        precondition(i >= 0 && i <= n, "sampleIndex(atTime: \(t)) = \(i) of \(n)")
        consume(try track.sample(at: i))
        consume(try track.decodeTime(ofSample: i))
    }
    precondition(track.tableMemory <= 1 << 20, "the sample table holds \(track.tableMemory) bytes")
    consume((track.timescale, track.sampleRate, track.coreSampleRate, track.channels,
             track.audioSpecificConfig, track.objectType, track.maxSampleSize,
             track.priming, track.validDuration, track.trimSource))
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    do {
        let file = try MP4File(reader: MP4MemoryReader(bytes))
        try exercise(file.track)
        consume((file.tags.title, file.tags.artist, file.tags.album, file.tags.albumArtist))
    } catch {
        consume(String(describing: error))  // every error message must render too
    }
    return 0
}
