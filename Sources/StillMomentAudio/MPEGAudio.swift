// MPEGAudio.swift — MPEG audio frame headers, Xing/LAME tags, ID3v2 skipping, and a scan
// for joined streams.
/// MPEG audio frame headers (MPEG 1, 2 and 2.5, layers 1 to 3), the Xing/Info and LAME
/// tags, and ID3v2 skipping: enough to recognise MPEG audio by its content, to catch a file
/// that is cut short, and to find streams joined into one file (a second stream after the
/// first one's Xing length, or a change of sample rate or channels). libmpg123 does the
/// decoding.
public struct MPEGFrameHeader: Equatable, Sendable {
    public enum Version: Sendable { case mpeg1, mpeg2, mpeg25 }
    public let version: Version
    public let layer: Int
    public let bitrate: Int        // bits per second
    public let sampleRate: Int
    public let padding: Bool
    public let channels: Int
    public let hasCRC: Bool

    /// Parses four header bytes; nil for anything that is not a valid header
    /// (free-format bitrate is not accepted: it cannot be verified cheaply).
    public init?(_ b0: UInt8, _ b1: UInt8, _ b2: UInt8, _ b3: UInt8) {
        guard b0 == 0xFF, b1 & 0xE0 == 0xE0 else { return nil }
        switch (b1 >> 3) & 3 {
        case 0: version = .mpeg25
        case 2: version = .mpeg2
        case 3: version = .mpeg1
        default: return nil
        }
        switch (b1 >> 1) & 3 {
        case 1: layer = 3
        case 2: layer = 2
        case 3: layer = 1
        default: return nil
        }
        hasCRC = b1 & 1 == 0
        let bitrateIndex = Int(b2 >> 4)
        let rateIndex = Int((b2 >> 2) & 3)
        guard bitrateIndex != 0, bitrateIndex != 15, rateIndex != 3 else { return nil }
        let rates1 = [44100, 48000, 32000]
        switch version {
        case .mpeg1: sampleRate = rates1[rateIndex]
        case .mpeg2: sampleRate = rates1[rateIndex] / 2
        case .mpeg25: sampleRate = rates1[rateIndex] / 4
        }
        let table: [Int]
        switch (version, layer) {
        case (.mpeg1, 1): table = [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448]
        case (.mpeg1, 2): table = [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384]
        case (.mpeg1, _): table = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]
        case (_, 1): table = [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256]
        default: table = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160]
        }
        bitrate = table[bitrateIndex] * 1000
        padding = (b2 >> 1) & 1 == 1
        channels = (b3 >> 6) == 3 ? 1 : 2
        // Emphasis value 2 is reserved.
        guard b3 & 3 != 2 else { return nil }
    }

    /// Samples per channel in one frame.
    public var samplesPerFrame: Int {
        switch layer {
        case 1: return 384
        case 2: return 1152
        default: return version == .mpeg1 ? 1152 : 576
        }
    }

    /// The frame's length in bytes, header included.
    public var frameLength: Int {
        if layer == 1 { return (12 * bitrate / sampleRate + (padding ? 1 : 0)) * 4 }
        let factor = (layer == 3 && version != .mpeg1) ? 72 : 144
        return factor * bitrate / sampleRate + (padding ? 1 : 0)
    }

    /// Offset of a Xing/Info tag within a layer-3 frame (after the side information).
    var xingOffset: Int {
        let side: Int
        if version == .mpeg1 { side = channels == 1 ? 17 : 32 } else { side = channels == 1 ? 9 : 17 }
        return 4 + side + (hasCRC ? 2 : 0)
    }
}

/// What a look at the first bytes of an MPEG audio file tells.
public struct MPEGProbe: Sendable {
    public let firstFrameOffset: UInt64
    public let header: MPEGFrameHeader
    /// From a Xing/Info tag: the number of MPEG frames and bytes of audio it declares.
    public let declaredFrames: Int?
    public let declaredBytes: Int?
    /// From a LAME tag: encoder delay and padding, in samples.
    public let encoderDelay: Int?
    public let encoderPadding: Int?

    /// Length of an ID3v2 tag at the start of `bytes` (0 if none).
    static func id3v2Length(_ bytes: [UInt8]) -> Int {
        guard bytes.count >= 10, bytes[0] == 0x49, bytes[1] == 0x44, bytes[2] == 0x33,
              bytes[6] & 0x80 == 0, bytes[7] & 0x80 == 0, bytes[8] & 0x80 == 0, bytes[9] & 0x80 == 0
        else { return 0 }
        let size = Int(bytes[6]) << 21 | Int(bytes[7]) << 14 | Int(bytes[8]) << 7 | Int(bytes[9])
        let footer = bytes[5] & 0x10 != 0 ? 10 : 0
        return 10 + size + footer
    }

    /// Recognises MPEG audio: optional ID3v2 tags, then (within the first 64 KiB after
    /// them) a frame header followed by a second valid header exactly one frame later.
    /// Returns nil when the content is not MPEG audio.
    public static func probe(_ file: AudioFile) throws(AudioError) -> MPEGProbe? {
        var offset: UInt64 = 0
        // Skip any number of ID3v2 tags (some files carry two).
        for _ in 0..<4 {
            let head = try file.read(at: offset, count: 10)
            let len = id3v2Length(head)
            if len == 0 { break }
            offset += UInt64(len)
        }
        if offset >= file.size { return nil }
        let window = try file.read(at: offset, count: 65536 + 4096)
        var i = 0
        while i + 4 <= min(window.count, 65536) {
            if window[i] == 0xFF, let h = MPEGFrameHeader(window[i], window[i + 1], window[i + 2], window[i + 3]) {
                let next = i + h.frameLength
                // A second header at the predicted place (or the file ends there).
                var confirmed = false
                if next + 4 <= window.count {
                    if let h2 = MPEGFrameHeader(window[next], window[next + 1], window[next + 2], window[next + 3]),
                       h2.version == h.version, h2.layer == h.layer, h2.sampleRate == h.sampleRate {
                        confirmed = true
                    }
                } else if offset + UInt64(next) >= file.size && i == 0 {
                    confirmed = true
                }
                if confirmed {
                    return make(header: h, at: offset + UInt64(i), frame: Array(window[i..<min(window.count, i + h.frameLength)]))
                }
            }
            i += 1
        }
        return nil
    }

    private static func make(header h: MPEGFrameHeader, at offset: UInt64, frame: [UInt8]) -> MPEGProbe {
        var frames: Int?, bytes: Int?, delay: Int?, padding: Int?
        let x = h.xingOffset
        func be32(_ p: Int) -> Int {
            Int(frame[p]) << 24 | Int(frame[p + 1]) << 16 | Int(frame[p + 2]) << 8 | Int(frame[p + 3])
        }
        if h.layer == 3, x + 8 <= frame.count {
            let tag = frame[x..<x + 4]
            if tag.elementsEqual([0x58, 0x69, 0x6E, 0x67]) || tag.elementsEqual([0x49, 0x6E, 0x66, 0x6F]) {
                let flags = be32(x + 4)
                var p = x + 8
                if flags & 1 != 0, p + 4 <= frame.count { frames = be32(p); p += 4 }
                if flags & 2 != 0, p + 4 <= frame.count { bytes = be32(p); p += 4 }
                if flags & 4 != 0 { p += 100 }
                if flags & 8 != 0 { p += 4 }
                // LAME extension: 9-byte version string, then at +21 the 24-bit delay/padding.
                if p + 24 <= frame.count {
                    let d = p + 21
                    delay = Int(frame[d]) << 4 | Int(frame[d + 1]) >> 4
                    padding = Int(frame[d + 1] & 0x0F) << 8 | Int(frame[d + 2])
                }
            }
        }
        return MPEGProbe(firstFrameOffset: offset, header: h, declaredFrames: frames, declaredBytes: bytes,
                         encoderDelay: delay, encoderPadding: padding)
    }
}

/// A walk over the frame headers of a whole MPEG audio file.
public enum MPEGScan {
    /// Where the stream's format changes: the first frame whose sample rate or channel count
    /// differs from the stream's first frame (confirmed by a second header right after it),
    /// and the time of that frame in seconds.
    public struct Change: Equatable, Sendable {
        public let offset: UInt64
        public let from: MPEGFrameHeader
        public let to: MPEGFrameHeader
        public let seconds: Double
    }

    /// Finds the first change of sample rate or channel count after `probe`'s first frame.
    /// Reads the file once, sequentially, in 64-KiB blocks; bytes that are not a frame (tags,
    /// garbage) are skipped the way a decoder resyncs.
    public static func firstFormatChange(_ file: AudioFile, probe: MPEGProbe) throws(AudioError) -> Change? {
        let first = probe.header
        var reader = BlockReader(file: file)
        var offset = probe.firstFrameOffset
        var seconds = 0.0
        while offset + 4 <= file.size {
            let head = Array(try reader.bytes(at: offset, count: 10))
            guard head.count >= 4 else { break }
            if head[0] == 0x49, head[1] == 0x44, head[2] == 0x33 {  // "ID3": a joined stream's tag
                let length = MPEGProbe.id3v2Length(head)
                if length > 0 { offset += UInt64(length); continue }
            }
            guard head[0] == 0xFF, let header = MPEGFrameHeader(head[0], head[1], head[2], head[3]),
                  header.frameLength > 0 else {
                offset += 1
                continue
            }
            let next = offset + UInt64(header.frameLength)
            let after = Array(try reader.bytes(at: next, count: 4))
            let confirmed: Bool
            if after.count < 4 {
                confirmed = next >= file.size
            } else if let h2 = MPEGFrameHeader(after[0], after[1], after[2], after[3]) {
                confirmed = h2.sampleRate == header.sampleRate && h2.channels == header.channels
            } else {
                confirmed = false
            }
            guard confirmed else {
                offset += 1
                continue
            }
            if header.sampleRate != first.sampleRate || header.channels != first.channels {
                return Change(offset: offset, from: first, to: header, seconds: seconds)
            }
            seconds += Double(header.samplesPerFrame) / Double(header.sampleRate)
            offset = next
        }
        return nil
    }

    /// Whether another MPEG stream follows the one a Xing/Info tag describes (two files
    /// joined with `cat`): a confirmed frame within 4 KiB after the declared end.
    public static func continuesAfterXingLength(_ file: AudioFile, probe: MPEGProbe) throws(AudioError) -> Bool {
        guard let declared = probe.declaredBytes, declared > 0 else { return false }
        let end = probe.firstFrameOffset + UInt64(declared)
        guard end < file.size else { return false }
        let window = try file.read(at: end, count: 4096 + 4096)
        var i = 0
        while i + 4 <= min(window.count, 4096) {
            if window[i] == 0xFF, let h = MPEGFrameHeader(window[i], window[i + 1], window[i + 2], window[i + 3]) {
                let next = i + h.frameLength
                if next + 4 <= window.count,
                   let h2 = MPEGFrameHeader(window[next], window[next + 1], window[next + 2], window[next + 3]),
                   h2.version == h.version, h2.layer == h.layer, h2.sampleRate == h.sampleRate {
                    return true
                }
            }
            i += 1
        }
        return false
    }

    /// Sequential reads of small pieces through one 64-KiB block.
    private struct BlockReader {
        let file: AudioFile
        var base: UInt64 = 0
        var block: [UInt8] = []

        init(file: AudioFile) { self.file = file }

        mutating func bytes(at offset: UInt64, count: Int) throws(AudioError) -> ArraySlice<UInt8> {
            if offset < base || offset + UInt64(count) > base + UInt64(block.count) {
                block = try file.read(at: offset, count: max(65536, count))
                base = offset
            }
            let start = Int(offset - base)
            return block[start..<min(block.count, start + count)]
        }
    }
}
