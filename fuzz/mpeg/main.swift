// libFuzzer harness for MPEG audio recognition (Sources/StillMomentAudio/MPEGAudio.swift):
// frame-header parsing, ID3v2 skipping, the Xing/Info + LAME tag and the scans for joined
// streams (MPEGScan). Built by fuzz/run.sh
// together with the real MPEGAudio.swift, AudioFile.swift, AudioError.swift and
// Buffers.swift (one module, nothing added to Sources/).
//
// The input goes into a memfd (an anonymous in-memory regular file) that is reached
// through /proc/self/fd/N, so MPEGProbe.probe runs on a real AudioFile with pread, with
// no disk I/O and nothing left behind.

import Glibc

@inline(never)
func consume<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    // 1. Pure parsers straight on the bytes.
    if let data, size >= 4 {
        if let h = MPEGFrameHeader(data[0], data[1], data[2], data[3]) {
            consume((h.frameLength, h.samplesPerFrame, h.xingOffset, h.bitrate, h.sampleRate))
        }
        consume(MPEGProbe.id3v2Length(Array(UnsafeBufferPointer(start: data, count: min(size, 10)))))
    }
    // 2. The real probe on a real file.
    store(data, size)
    do {
        let file = try AudioFile(path: memfdPath)
        if let p = try MPEGProbe.probe(file) {
            consume((p.firstFrameOffset, p.header, p.declaredFrames, p.declaredBytes,
                     p.encoderDelay, p.encoderPadding, p.header.frameLength))
            // 3. The scans for joined streams (a second stream, a change of format).
            consume(try MPEGScan.continuesAfterXingLength(file, probe: p))
            consume(try MPEGScan.firstFormatChange(file, probe: p))
        }
    } catch {
        consume(error.description)
    }
    return 0
}
