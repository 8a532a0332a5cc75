// Where an MP3's frames begin in its file: libmpg123's frame index (one byte offset every
// `step` MPEG frames), taken once the import has read the whole file and handed to the
// decoder at each open. Without it, libmpg123 reaches a far frame by reading every frame
// before it (a resume at 9:00 of a 192-kbit/s file read 13 MB first); with it, the frames
// from the nearest indexed one: libmpg123 keeps at most 1,000 offsets, so for an hour of
// 44.1-kHz MP3 one every 256 frames (6.7 s of audio, about 100 KB at 128 kbit/s).
import Glibc

public struct SeekIndex: Sendable, Equatable {
    /// MPEG frames between two offsets.
    public let step: Int64
    /// Byte offsets in the file of frames 0, step, 2 * step, …
    public let offsets: [Int64]
    /// The same as libmpg123 takes them, made once where the index is read (not on the
    /// render thread, where a guided voice opens its decoder); empty when one does not fit
    /// an off_t (a 32-bit build without large files): then it is not used.
    let fileOffsets: [off_t]

    /// The most offsets kept (libmpg123 keeps at most 1,000 and widens its step to fit).
    public static let maxOffsets = 65_536

    /// nil unless it can be an index of a file of `fileSize` bytes: a step of 1 or more,
    /// offsets that rise and lie inside the file (the catalog is input too).
    public init?(step: Int64, offsets: [Int64], fileSize: Int64) {
        guard step >= 1, step <= 1 << 24, !offsets.isEmpty, offsets.count <= Self.maxOffsets else { return nil }
        var last: Int64 = -1
        for o in offsets {
            guard o > last, o < fileSize else { return nil }
            last = o
        }
        self.step = step
        self.offsets = offsets
        let converted = offsets.compactMap { off_t(exactly: $0) }
        fileOffsets = converted.count == offsets.count ? converted : []
    }

    /// The offsets as stored: 8 bytes each, little-endian.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(offsets.count * 8)
        for o in offsets { withUnsafeBytes(of: o.littleEndian) { out.append(contentsOf: $0) } }
        return out
    }

    /// From stored bytes (nil when they cannot be an index of the file).
    public init?(step: Int64, bytes: [UInt8], fileSize: Int64) {
        guard bytes.count % 8 == 0, bytes.count / 8 <= Self.maxOffsets else { return nil }
        var offsets: [Int64] = []
        offsets.reserveCapacity(bytes.count / 8)
        var i = 0
        while i < bytes.count {
            var v: Int64 = 0
            for k in 0..<8 { v |= Int64(bytes[i + k]) << (8 * k) }
            offsets.append(v)
            i += 8
        }
        self.init(step: step, offsets: offsets, fileSize: fileSize)
    }
}
