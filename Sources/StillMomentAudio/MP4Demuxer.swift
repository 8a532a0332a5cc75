// MP4Demuxer.swift — a memory-safe ISO-BMFF (MP4/M4A) demuxer for AAC audio.
//
// Reads the box structure and the sample table of the first AAC sound track, the trim
// information (edit list or iTunSMPB) and the iTunes tags. It never reads the `mdat`
// payload: the sample table gives each access unit's file offset and size, and the decoder
// reads them one at a time through an `MP4ByteReader`.
//
// The parser is meant to be fuzzed, and its memory is bounded by a constant, never by the
// file's declared or real size. `moov` is not read whole: `MP4MoovLoader` walks it in the
// file and keeps an image of at most 4 MiB (containers, the small header boxes, tags up to
// 64 KiB each), with each sample table (stts, stsc, stsz/stz2, stco/co64, elst) reduced to its
// fixed fields. `MP4SampleTable` reads the entries from the file through small windows,
// checks every sample against the file once when the file is opened, and keeps at most a few
// thousand checkpoints for random access. Every size and count is validated against the bytes
// that hold it, all arithmetic on file values is checked, every loop advances, and nothing is
// recursive.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Public API

/// Why an MP4/M4A file could not be demuxed.
public enum MP4Error: Error, Equatable, Sendable {
    /// The data does not start with an ISO-BMFF box (`ftyp`, `moov`, `mdat`, `free`, …).
    case notMP4
    /// A box (or a sample) extends past the end of the file; the string names what.
    case truncated(String)
    /// Inconsistent boxes or tables; the string says what is wrong.
    case corrupt(String)
    /// The file has no sound track.
    case noAudioTrack
    /// The sound track is not AAC: the sample entry fourcc (`alac`, `ac-3`, `Opus`, …), or a
    /// description such as `mp4a object type 0x6B (MP3)` or `AAC audio object type 42 (USAC)`.
    case unsupportedCodec(String)
    /// The reader failed (an I/O error); the string is its reason.
    case unreadable(String)
}

/// iTunes-style tags from `moov/udta/meta/ilst`.
public struct MP4Tags: Sendable, Equatable {
    public var title: String?
    public var artist: String?
    public var album: String?
    public var albumArtist: String?

    public init(title: String? = nil, artist: String? = nil, album: String? = nil, albumArtist: String? = nil) {
        self.title = title
        self.artist = artist
        self.album = album
        self.albumArtist = albumArtist
    }
}

/// Where the gapless trim (`MP4AudioTrack.priming` / `validDuration`) came from.
public enum TrimSource: Sendable, Equatable {
    /// `trak/edts/elst`: the first non-empty edit.
    case editList
    /// The iTunes `iTunSMPB` freeform tag (encoder delay, padding, original length).
    case iTunSMPB
    /// Neither was present: nothing is trimmed (priming 0, `validDuration` nil), as FFmpeg does.
    case none
}

/// Random access to the bytes of a file (or of memory).
public protocol MP4ByteReader {
    /// Total size in bytes.
    var size: UInt64 { get }
    /// Reads up to `count` bytes at `offset`. Returns fewer bytes than `count` only at the end
    /// of the data (and an empty array at or past it).
    func read(at offset: UInt64, count: Int) throws -> [UInt8]
}

// Files are read through `AudioFile` (AACDecoder.swift makes it an `MP4ByteReader`).

/// An in-memory `MP4ByteReader`, for tests and fuzzing.
public struct MP4MemoryReader: MP4ByteReader, Sendable {
    public let bytes: [UInt8]
    public init(_ bytes: [UInt8]) { self.bytes = bytes }
    public var size: UInt64 { UInt64(bytes.count) }
    public func read(at offset: UInt64, count: Int) throws -> [UInt8] {
        guard count > 0, offset < size else { return [] }
        let start = Int(offset)  // < bytes.count
        let end = start + min(count, bytes.count - start)
        return Array(bytes[start..<end])
    }
}

/// The AAC sound track of an MP4 file: decoder configuration, sample table and trim.
///
/// The sample table is read from the file on demand (through the reader the file was opened
/// with), so the accessors can throw an I/O error. Not thread-safe: one decoder uses it.
public struct MP4AudioTrack {
    /// The media timescale (`mdhd`): units of `duration(ofSample:)`, `totalDuration`,
    /// `decodeTime(ofSample:)`.
    public let timescale: UInt32
    /// The output sample rate the AudioSpecificConfig announces: the core rate, or for
    /// explicitly signalled HE-AAC (AOT 5/29, or the backward-compatible 0x2B7 sync extension)
    /// the SBR extension rate. With *implicit* SBR (plain AOT 2 at ≤ 24 kHz) this is the core
    /// rate, and faad2 will by default produce twice it. The rate and channel count returned by
    /// `NeAACDecInit2` are authoritative; this value is for display and for sizing.
    public let sampleRate: Int
    /// The AAC core sampling rate (equal to `sampleRate` unless SBR is explicitly signalled).
    public let coreSampleRate: Int
    /// Channels from the AudioSpecificConfig (channel configuration or program config element),
    /// or from the sample entry when the ASC says 0. Parametric stereo (objectType 29) decodes a
    /// mono core to 2 channels; faad2 may also upmix mono to stereo; trust `NeAACDecInit2`.
    public let channels: Int
    /// The esds DecoderSpecificInfo, for `NeAACDecInit2`. Synthesized for MPEG-2 AAC object
    /// types (0x66/0x67) that carry none.
    public let audioSpecificConfig: [UInt8]
    /// AAC audio object type (2 = LC, 5 = SBR/HE-AAC, 29 = PS/HE-AACv2), including explicit
    /// (hierarchical or backward-compatible) SBR/PS signalling.
    public let objectType: Int
    /// Number of access units (the smaller of the stsz/stz2 and stts counts).
    public var sampleCount: Int { table.sampleCount }
    /// The sum of all sample durations, in `timescale` units.
    public var totalDuration: UInt64 { table.totalDuration }
    /// The largest sample size (at most `MP4File.maxSampleSize`), for sizing a read buffer.
    public var maxSampleSize: UInt32 { table.maxSampleSize }
    /// Frames to drop at the start of the decoded stream, in frames at `sampleRate`.
    ///
    /// From the edit list: `media_time` converted from the media timescale to `sampleRate`
    /// (identical when the timescale is the sample rate, as usual for AAC). From iTunSMPB: the
    /// encoder delay field, taken as is (iTunSMPB counts decoded frames). With neither, 0.
    /// For implicit SBR (see `sampleRate`) the decoder's output rate is twice `sampleRate`; the
    /// caller scales edit-list values by the actual output rate / `sampleRate`.
    public let priming: Int64
    /// Frames to keep after `priming`, in frames at `sampleRate`; nil keeps everything to the
    /// end. From the edit list: the segment duration converted from the movie timescale (mvhd)
    /// to the media timescale (rounded to nearest) and then to `sampleRate`, clamped to what the
    /// samples hold. From iTunSMPB: the original length field, or when that is 0, the total
    /// minus delay minus padding. Either may exceed what the track holds (a damaged iTunSMPB);
    /// the decoder clamps it.
    public let validDuration: Int64?
    /// Where `priming` and `validDuration` came from.
    public let trimSource: TrimSource

    let table: MP4SampleTable

    /// Bytes the sample table keeps in memory (read windows and checkpoints). Bounded by a
    /// constant, whatever the number of samples.
    public var tableMemory: Int { table.memory }

    /// File offset and size of sample `index` (0-based). Returns (0, 0) for an index out of
    /// range.
    public func sample(at index: Int) throws(MP4Error) -> (offset: UInt64, size: UInt32) {
        try table.sample(at: index)
    }

    /// Duration of sample `index` in `timescale` units; 0 out of range.
    public func duration(ofSample index: Int) throws(MP4Error) -> UInt32 {
        try table.duration(ofSample: index)
    }

    /// Decode time of sample `index` in `timescale` units (`totalDuration` for `sampleCount`
    /// and beyond); 0 for negative indices.
    public func decodeTime(ofSample index: Int) throws(MP4Error) -> UInt64 {
        try table.decodeTime(ofSample: index)
    }

    /// Index of the sample whose decode interval contains `time` (in `timescale` units);
    /// `sampleCount` when `time >= totalDuration`.
    public func sampleIndex(atTime time: UInt64) throws(MP4Error) -> Int {
        try table.sampleIndex(atTime: time)
    }
}

/// A parsed MP4/M4A file: the first supported (AAC) sound track and the tags.
public struct MP4File {
    /// The most `moov` bytes kept in memory besides the sample tables (boxes of other kinds are
    /// reduced to their headers, tags over 64 KiB are dropped).
    public static let maxHeaderBytes = MP4MoovLoader.maxImageSize
    /// The largest access unit accepted. An AAC frame holds at most 6144 bits per channel
    /// (36 KiB for 48 channels); anything larger is damage.
    public static let maxSampleSize: UInt32 = 1 << 20
    /// At most this many `trak` boxes are examined.
    public static let maxTracks = 64

    public let track: MP4AudioTrack
    public let tags: MP4Tags

    /// Parses the box structure; reads `moov`'s headers and the sample tables, never the media
    /// data.
    ///
    /// Picks the first `soun` track whose sample entry is AAC (`mp4a` with an MPEG-4 or
    /// MPEG-2 AAC object type). If there is none, throws the first error met in a sound track
    /// (`unsupportedCodec` for, e.g., ALAC), else `noAudioTrack`. Errors in tags are ignored.
    public init(reader: some MP4ByteReader) throws(MP4Error) {
        let moov = try MP4File.locateMoov(reader)
        var loader = MP4MoovLoader(reader: reader)
        try loader.load(payloadAt: moov.offset, length: moov.length)
        let parser = MP4MoovParser(bytes: loader.image, tables: loader.tables, reader: reader)
        (track, tags) = try parser.parse(sawFragments: moov.sawFragments)
    }

    /// Walks the top-level boxes and returns where the payload of the first `moov` is.
    private static func locateMoov(_ reader: some MP4ByteReader) throws(MP4Error)
        -> (offset: UInt64, length: UInt64, sawFragments: Bool)
    {
        let fileSize = reader.size
        let firstTypes: Set<UInt32> = [
            FourCC.ftyp, FourCC.styp, FourCC.moov, FourCC.mdat, FourCC.free, FourCC.skip, FourCC.wide, FourCC.pdin,
        ]
        var offset: UInt64 = 0
        var index = 0
        var sawFragments = false
        while offset < fileSize {
            index += 1
            guard index <= 1_000_000 else { throw .corrupt("more than a million top-level boxes and no moov") }
            let remaining = fileSize - offset
            if remaining < 8 {
                if index == 1 { throw .notMP4 }
                break  // trailing garbage
            }
            let header = try mp4Read(reader, at: offset, count: Int(min(remaining, 16)))
            guard header.count >= 8, let size32 = header.mp4BE32(0), let type = header.mp4BE32(4) else {
                if index == 1 { throw .notMP4 }
                throw .truncated("box header at offset \(offset)")
            }
            if index == 1, !firstTypes.contains(type) { throw .notMP4 }
            var headerSize: UInt64 = 8
            var boxSize: UInt64
            switch size32 {
            case 0:
                boxSize = remaining
            case 1:
                guard let large = header.mp4BE64(8) else {
                    if index == 1 { throw .notMP4 }
                    throw .truncated("'\(fourCCName(type))' box header at offset \(offset)")
                }
                boxSize = large
                headerSize = 16
            default:
                boxSize = UInt64(size32)
            }
            guard boxSize >= headerSize else {
                if index == 1 { throw .notMP4 }
                throw .corrupt("'\(fourCCName(type))' box at offset \(offset) has an invalid size \(boxSize)")
            }
            if boxSize > remaining {
                if type == FourCC.mdat {
                    // Samples past the end are reported by the sample table check.
                    break
                }
                throw .truncated("'\(fourCCName(type))' box at offset \(offset) (\(boxSize) bytes, \(remaining) left in the file)")
            }
            switch type {
            case FourCC.moov:
                return (offset + headerSize, boxSize - headerSize, sawFragments)
            case FourCC.moof, FourCC.sidx:
                sawFragments = true
            default:
                break
            }
            offset += boxSize  // boxSize ≤ remaining: no overflow
        }
        if sawFragments { throw .corrupt("fragmented MP4 without a moov box is not supported") }
        throw .truncated("moov box not found (the file may be cut short)")
    }
}

/// Reads through `reader`, turning its error into `MP4Error.unreadable` and never returning
/// more than `count` bytes.
fileprivate func mp4Read(_ reader: some MP4ByteReader, at offset: UInt64, count: Int) throws(MP4Error) -> [UInt8] {
    do {
        let bytes = try reader.read(at: offset, count: count)
        return bytes.count > count ? Array(bytes.prefix(count)) : bytes
    } catch let error as MP4Error {
        throw error
    } catch {
        throw .unreadable("\(error)")
    }
}

/// `value * numerator / denominator`, rounded down; nil on a zero denominator or when the
/// result does not fit in 64 bits. Exact for all inputs (128-bit intermediate).
func mp4Scale(_ value: UInt64, _ numerator: UInt64, _ denominator: UInt64) -> UInt64? {
    guard denominator > 0 else { return nil }
    let product = value.multipliedFullWidth(by: numerator)
    guard product.high < denominator else { return nil }
    return denominator.dividingFullWidth(product).quotient
}
// MARK: - Four-character codes

fileprivate func fourCC(_ string: StaticString) -> UInt32 {
    var value: UInt32 = 0
    string.withUTF8Buffer { buffer in
        for byte in buffer.prefix(4) { value = value << 8 | UInt32(byte) }
    }
    return value
}

fileprivate enum FourCC {
    static let ftyp = fourCC("ftyp"), styp = fourCC("styp"), moov = fourCC("moov"), mdat = fourCC("mdat")
    static let free = fourCC("free"), skip = fourCC("skip"), wide = fourCC("wide"), pdin = fourCC("pdin")
    static let moof = fourCC("moof"), sidx = fourCC("sidx"), mvex = fourCC("mvex")
    static let mvhd = fourCC("mvhd"), trak = fourCC("trak"), udta = fourCC("udta"), meta = fourCC("meta")
    static let mdia = fourCC("mdia"), hdlr = fourCC("hdlr"), mdhd = fourCC("mdhd"), minf = fourCC("minf")
    static let stbl = fourCC("stbl"), stsd = fourCC("stsd"), stts = fourCC("stts"), stsc = fourCC("stsc")
    static let stsz = fourCC("stsz"), stz2 = fourCC("stz2"), stco = fourCC("stco"), co64 = fourCC("co64")
    static let edts = fourCC("edts"), elst = fourCC("elst"), soun = fourCC("soun"), mp4a = fourCC("mp4a")
    static let esds = fourCC("esds"), wave = fourCC("wave"), ilst = fourCC("ilst"), data = fourCC("data")
    static let mean = fourCC("mean"), name = fourCC("name"), keys = fourCC("keys"), mhdr = fourCC("mhdr")
    static let freeform = fourCC("----"), aART = fourCC("aART")
    static let title: UInt32 = 0xA96E_616D   // ©nam
    static let artist: UInt32 = 0xA941_5254  // ©ART
    static let album: UInt32 = 0xA961_6C62   // ©alb
}

/// A printable name for a fourcc: `mp4a`, `©nam`, or `0x00000000`.
fileprivate func fourCCName(_ value: UInt32) -> String {
    var name = ""
    for shift: UInt32 in [24, 16, 8, 0] {
        let byte = UInt8(truncatingIfNeeded: value >> shift)
        if byte == 0xA9 {
            name += "©"
        } else if byte >= 0x20, byte < 0x7F {
            name.unicodeScalars.append(Unicode.Scalar(byte))
        } else {
            return "0x" + hex(UInt64(value), digits: 8)
        }
    }
    return name
}

fileprivate func hex(_ value: UInt64, digits: Int) -> String {
    let text = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, digits - text.count)) + text
}

// MARK: - Byte access

extension Array where Element == UInt8 {
    fileprivate func mp4BE16(_ i: Int) -> UInt16? {
        guard i >= 0, i <= count - 2 else { return nil }
        return UInt16(self[i]) << 8 | UInt16(self[i + 1])
    }

    fileprivate func mp4BE32(_ i: Int) -> UInt32? {
        guard i >= 0, i <= count - 4 else { return nil }
        return UInt32(self[i]) << 24 | UInt32(self[i + 1]) << 16 | UInt32(self[i + 2]) << 8 | UInt32(self[i + 3])
    }

    fileprivate func mp4BE64(_ i: Int) -> UInt64? {
        guard let high = mp4BE32(i), let low = mp4BE32(i + 4) else { return nil }
        return UInt64(high) << 32 | UInt64(low)
    }
}

/// A box inside the in-memory `moov` image: `[start, end)` with the payload at `body`.
struct MP4Box {
    let type: UInt32
    let start: Int
    let body: Int
    let end: Int
    var name: String { fourCCName(type) }
}

/// Iterates the child boxes in `[position, end)` of a buffer. Stops at fewer than 8 bytes
/// (QuickTime terminators, padding); a child overrunning its parent is corrupt. A size of 0
/// extends to the end of the parent.
fileprivate struct MP4BoxIterator {
    let bytes: [UInt8]
    var position: Int
    let end: Int
    let parent: String

    init(_ bytes: [UInt8], from start: Int, to end: Int, parent: String) {
        self.bytes = bytes
        self.end = max(0, min(end, bytes.count))
        self.position = max(0, min(start, self.end))
        self.parent = parent
    }

    init(_ bytes: [UInt8], children box: MP4Box) {
        self.init(bytes, from: box.body, to: box.end, parent: box.name)
    }

    mutating func next() throws(MP4Error) -> MP4Box? {
        let available = end - position
        guard available >= 8, let size32 = bytes.mp4BE32(position), let type = bytes.mp4BE32(position + 4) else { return nil }
        var headerSize = 8
        let size: Int
        switch size32 {
        case 0:
            size = available
        case 1:
            guard available >= 16, let large = bytes.mp4BE64(position + 8) else {
                throw .corrupt("'\(fourCCName(type))' box in '\(parent)' has a cut-off 64-bit size")
            }
            guard large <= UInt64(available) else {
                throw .corrupt("'\(fourCCName(type))' box (\(large) bytes) overruns its parent '\(parent)'")
            }
            size = Int(large)
            headerSize = 16
        default:
            guard UInt64(size32) <= UInt64(available) else {
                throw .corrupt("'\(fourCCName(type))' box (\(size32) bytes) overruns its parent '\(parent)'")
            }
            size = Int(size32)
        }
        guard size >= headerSize else {
            throw .corrupt("'\(fourCCName(type))' box in '\(parent)' has an invalid size \(size)")
        }
        let box = MP4Box(type: type, start: position, body: position + headerSize, end: position + size)
        position += size
        return box
    }
}

/// Bounds-checked big-endian reads in `[position, end)` of a buffer.
fileprivate struct MP4Cursor {
    let bytes: [UInt8]
    var position: Int
    let end: Int
    let what: String

    init(_ bytes: [UInt8], from start: Int, to end: Int, what: String) {
        self.bytes = bytes
        self.end = max(0, min(end, bytes.count))
        self.position = max(0, min(start, self.end))
        self.what = what
    }

    init(_ bytes: [UInt8], payloadOf box: MP4Box) {
        self.init(bytes, from: box.body, to: box.end, what: "'\(box.name)' box")
    }

    var remaining: Int { end - position }

    private func short() -> MP4Error { .corrupt("\(what) is too short") }

    mutating func skip(_ count: Int) throws(MP4Error) {
        guard count >= 0, count <= remaining else { throw short() }
        position += count
    }

    mutating func u8() throws(MP4Error) -> UInt8 {
        guard remaining >= 1 else { throw short() }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func u16() throws(MP4Error) -> UInt16 {
        guard remaining >= 2, let value = bytes.mp4BE16(position) else { throw short() }
        position += 2
        return value
    }

    mutating func u24() throws(MP4Error) -> UInt32 {
        let high = try u8()
        return UInt32(high) << 16 | UInt32(try u16())
    }

    mutating func u32() throws(MP4Error) -> UInt32 {
        guard remaining >= 4, let value = bytes.mp4BE32(position) else { throw short() }
        position += 4
        return value
    }

    mutating func u64() throws(MP4Error) -> UInt64 {
        guard remaining >= 8, let value = bytes.mp4BE64(position) else { throw short() }
        position += 8
        return value
    }

    mutating func take(_ count: Int) throws(MP4Error) -> [UInt8] {
        guard count >= 0, count <= remaining else { throw short() }
        defer { position += count }
        return Array(bytes[position..<(position + count)])
    }

}

// MARK: - Arithmetic

/// `value * numerator / denominator`, rounded to nearest; nil on overflow or a zero denominator.
fileprivate func scaleRounded(_ value: UInt64, _ numerator: UInt64, _ denominator: UInt64) -> UInt64? {
    guard denominator > 0 else { return nil }
    if numerator == denominator { return value }
    let product = value.multipliedFullWidth(by: numerator)
    let (low, carry) = product.low.addingReportingOverflow(denominator / 2)
    let high = product.high + (carry ? 1 : 0)  // product.high ≤ 2^64 − 2
    guard high < denominator else { return nil }
    return denominator.dividingFullWidth((high, low)).quotient
}

// MARK: - moov

fileprivate struct MP4MoovParser {
    /// The moov image (see `MP4MoovLoader`).
    let bytes: [UInt8]
    /// Where the entries of each table box (by its offset in `bytes`) are in the file.
    let tables: [Int: MP4Extent]
    let reader: any MP4ByteReader

    /// The first child types that tell a QuickTime `meta` (no version and flags) from an ISO one.
    static let quickTimeMetaChildren: Set<UInt32> = [FourCC.hdlr, FourCC.ilst, FourCC.keys, FourCC.mhdr]

    func parse(sawFragments: Bool) throws(MP4Error) -> (MP4AudioTrack, MP4Tags) {
        var movieTimescale: UInt32 = 0
        var traks: [MP4Box] = []
        var udta: MP4Box?
        var moovMeta: MP4Box?
        var fragmented = sawFragments
        var iterator = MP4BoxIterator(bytes, from: 0, to: bytes.count, parent: "moov")
        while let box = try iterator.next() {
            switch box.type {
            case FourCC.mvhd:
                movieTimescale = (try? parseMediaHeader(box).timescale) ?? 0
            case FourCC.trak:
                if traks.count < MP4File.maxTracks { traks.append(box) }
            case FourCC.udta:
                if udta == nil { udta = box }
            case FourCC.meta:
                if moovMeta == nil { moovMeta = box }
            case FourCC.mvex:
                fragmented = true
            default:
                break
            }
        }

        var tags = MP4Tags()
        var smpb: String?
        var metas: [MP4Box] = []
        if let udta, let meta = try? child(FourCC.meta, of: udta) { metas.append(meta) }
        if let moovMeta { metas.append(moovMeta) }
        for meta in metas {
            if let result = try? parseMeta(meta) {
                tags = result.0
                smpb = result.1
                break
            }
        }

        var firstError: MP4Error?
        for trak in traks {
            do {
                if let track = try parseTrack(trak, movieTimescale: movieTimescale, smpb: smpb, fragmented: fragmented) {
                    return (track, tags)
                }
            } catch {
                if firstError == nil { firstError = error }
            }
        }
        throw firstError ?? .noAudioTrack
    }

    func child(_ type: UInt32, of box: MP4Box) throws(MP4Error) -> MP4Box? {
        var iterator = MP4BoxIterator(bytes, children: box)
        while let candidate = try iterator.next() {
            if candidate.type == type { return candidate }
        }
        return nil
    }

    func required(_ type: UInt32, in box: MP4Box) throws(MP4Error) -> MP4Box {
        guard let found = try child(type, of: box) else {
            throw .corrupt("'\(box.name)' box has no '\(fourCCName(type))' box")
        }
        return found
    }

    /// mvhd and mdhd share the layout up to the duration (versions 0 and 1).
    func parseMediaHeader(_ box: MP4Box) throws(MP4Error) -> (timescale: UInt32, duration: UInt64) {
        var cursor = MP4Cursor(bytes, payloadOf: box)
        let version = try cursor.u8()
        try cursor.skip(3)
        if version == 1 {
            try cursor.skip(16)
            let timescale = try cursor.u32()
            return (timescale, try cursor.u64())
        }
        try cursor.skip(8)
        let timescale = try cursor.u32()
        return (timescale, UInt64(try cursor.u32()))
    }

    // MARK: trak

    /// nil when the track is not a sound track.
    func parseTrack(_ trak: MP4Box, movieTimescale: UInt32, smpb: String?, fragmented: Bool) throws(MP4Error) -> MP4AudioTrack? {
        let mdia = try required(FourCC.mdia, in: trak)
        let hdlr = try required(FourCC.hdlr, in: mdia)
        var hdlrCursor = MP4Cursor(bytes, payloadOf: hdlr)
        try hdlrCursor.skip(8)
        guard try hdlrCursor.u32() == FourCC.soun else { return nil }

        let mdhd = try parseMediaHeader(try required(FourCC.mdhd, in: mdia))
        guard mdhd.timescale > 0 else { throw .corrupt("the audio track's timescale (mdhd) is 0") }
        let stbl = try required(FourCC.stbl, in: try required(FourCC.minf, in: mdia))

        let stsd = try required(FourCC.stsd, in: stbl)
        var stsdCursor = MP4Cursor(bytes, payloadOf: stsd)
        try stsdCursor.skip(4)
        guard try stsdCursor.u32() > 0 else { throw .corrupt("stsd has no sample entry") }
        var entries = MP4BoxIterator(bytes, from: stsdCursor.position, to: stsd.end, parent: "stsd")
        guard let entry = try entries.next() else { throw .corrupt("stsd has no sample entry") }
        guard entry.type == FourCC.mp4a else { throw .unsupportedCodec(fourCCName(entry.type)) }
        let config = try parseMP4A(entry)

        let table = try sampleTable(stbl, timescale: mdhd.timescale)
        if table.sampleCount == 0 {
            if fragmented { throw .corrupt("fragmented MP4 (moof) is not supported") }
            throw .corrupt("the audio track has no samples")
        }
        // The durations must fit AAC frames: 1024 (960; 512 or 480 for low delay) samples
        // each at the core rate. A timescale or stts far off that (0xFFFFFFFF, frames of
        // 12 hours) is damage, not something to play for days.
        let coreSamples = mp4Scale(table.totalDuration, UInt64(config.coreSampleRate), UInt64(mdhd.timescale))
        let frames = UInt64(table.sampleCount)
        guard let coreSamples, coreSamples / frames <= 4096, coreSamples + 1024 >= frames * 120 else {
            let seconds = table.totalDuration / UInt64(mdhd.timescale)
            throw .corrupt("the sample durations (stts, timescale \(mdhd.timescale) in mdhd) give \(frames) AAC frames \(seconds) s in all, far from \(frames * 1024 / UInt64(config.coreSampleRate)) s at \(config.coreSampleRate) Hz")
        }

        let trim = computeTrim(
            trak: trak, mediaTimescale: mdhd.timescale, movieTimescale: movieTimescale,
            totalDuration: table.totalDuration, sampleRate: config.sampleRate, smpb: smpb)

        return MP4AudioTrack(
            timescale: mdhd.timescale, sampleRate: config.sampleRate, coreSampleRate: config.coreSampleRate,
            channels: config.channels, audioSpecificConfig: config.asc, objectType: config.objectType,
            priming: trim.priming, validDuration: trim.validDuration, trimSource: trim.source, table: table)
    }

    /// The stub of table box `box` in the image, with where its entries are.
    private func stub(_ box: MP4Box) throws(MP4Error) -> MP4SampleTable.Stub {
        guard let extent = tables[box.start] else { throw .corrupt("the '\(box.name)' box could not be read") }
        return MP4SampleTable.Stub(box: box, extent: extent)
    }

    private func sampleTable(_ stbl: MP4Box, timescale: UInt32) throws(MP4Error) -> MP4SampleTable {
        var stts: MP4Box?, stsc: MP4Box?, sizeBox: MP4Box?, chunkBox: MP4Box?
        var iterator = MP4BoxIterator(bytes, children: stbl)
        while let box = try iterator.next() {
            switch box.type {
            case FourCC.stts: if stts == nil { stts = box }
            case FourCC.stsc: if stsc == nil { stsc = box }
            case FourCC.stsz, FourCC.stz2: if sizeBox == nil { sizeBox = box }
            case FourCC.stco, FourCC.co64: if chunkBox == nil { chunkBox = box }
            default: break
            }
        }
        guard let stts else { throw .corrupt("the audio track has no stts (sample durations) box") }
        guard let stsc else { throw .corrupt("the audio track has no stsc (sample-to-chunk) box") }
        guard let sizeBox else { throw .corrupt("the audio track has no stsz/stz2 (sample sizes) box") }
        guard let chunkBox else { throw .corrupt("the audio track has no stco/co64 (chunk offsets) box") }
        return try MP4SampleTable.build(
            stts: try stub(stts), stsc: try stub(stsc), sizes: try stub(sizeBox), chunks: try stub(chunkBox),
            image: bytes, reader: reader, timescale: timescale)
    }

    // MARK: mp4a / esds

    struct AudioConfig {
        var asc: [UInt8]
        var objectType: Int
        var sampleRate: Int
        var coreSampleRate: Int
        var channels: Int
    }

    func parseMP4A(_ entry: MP4Box) throws(MP4Error) -> AudioConfig {
        var cursor = MP4Cursor(bytes, payloadOf: entry)
        try cursor.skip(8)  // reserved, data_reference_index
        let version = try cursor.u16()
        try cursor.skip(6)  // revision, vendor
        var channels = Int(try cursor.u16())
        try cursor.skip(6)  // sample size, compression id, packet size
        var rate = Int(try cursor.u32() >> 16)
        let base = entry.body
        switch version {
        case 1:
            try? cursor.skip(16)
        case 2:
            if (try? cursor.skip(4)) != nil, let bits = try? cursor.u64(), let count = try? cursor.u32() {
                let value = Double(bitPattern: bits)
                if value.isFinite, value >= 1, value < 16_777_216 { rate = Int(value) }
                if count <= 255 { channels = Int(count) }
                try? cursor.skip(20)
            }
        default:
            break
        }
        // Children start after the version-specific fields; fall back to the other layouts
        // for files whose version field lies.
        var esds: MP4Box?
        for start in [cursor.position, base + 28, base + 44, base + 64] where start <= entry.end {
            if let found = try? findESDS(from: start, to: entry.end) {
                esds = found
                break
            }
        }
        guard let esds else { throw .corrupt("the mp4a sample entry has no esds box") }
        return try parseESDS(esds, entryRate: rate, entryChannels: channels)
    }

    /// esds directly among the children, or inside a QuickTime `wave` box.
    private func findESDS(from start: Int, to end: Int) throws(MP4Error) -> MP4Box? {
        var iterator = MP4BoxIterator(bytes, from: start, to: end, parent: "mp4a")
        while let box = try iterator.next() {
            if box.type == FourCC.esds { return box }
            if box.type == FourCC.wave, let inner = try child(FourCC.esds, of: box) { return inner }
        }
        return nil
    }

    /// Reads a descriptor tag and its variable-length size (clamped to what is left).
    private func descriptor(_ cursor: inout MP4Cursor) throws(MP4Error) -> (tag: UInt8, end: Int) {
        let tag = try cursor.u8()
        var length = 0
        for _ in 0..<4 {
            let byte = try cursor.u8()
            length = length << 7 | Int(byte & 0x7F)
            if byte & 0x80 == 0 { break }
        }
        return (tag, cursor.position + min(length, cursor.remaining))
    }

    private func parseESDS(_ esds: MP4Box, entryRate: Int, entryChannels: Int) throws(MP4Error) -> AudioConfig {
        var cursor = MP4Cursor(bytes, payloadOf: esds)
        try cursor.skip(4)  // version, flags
        var header = try descriptor(&cursor)
        if header.tag == 0x03 {  // ES_Descriptor
            var es = MP4Cursor(bytes, from: cursor.position, to: header.end, what: "ES_Descriptor")
            try es.skip(2)  // ES_ID
            let flags = try es.u8()
            if flags & 0x80 != 0 { try es.skip(2) }             // dependsOn_ES_ID
            if flags & 0x40 != 0 { try es.skip(Int(try es.u8())) }  // URL
            if flags & 0x20 != 0 { try es.skip(2) }             // OCR_ES_Id
            cursor = es
            header = try descriptor(&cursor)
            while header.tag != 0x04 {
                try cursor.skip(header.end - cursor.position)
                guard cursor.remaining >= 2 else { throw .corrupt("esds has no DecoderConfigDescriptor") }
                header = try descriptor(&cursor)
            }
        }
        guard header.tag == 0x04 else { throw .corrupt("esds has no DecoderConfigDescriptor") }
        var config = MP4Cursor(bytes, from: cursor.position, to: header.end, what: "DecoderConfigDescriptor")
        let objectTypeIndication = try config.u8()
        try config.skip(12)  // stream type, buffer size, bitrates
        var asc: [UInt8]?
        while config.remaining >= 2 {
            let sub = try descriptor(&config)
            if sub.tag == 0x05 {
                asc = try config.take(sub.end - config.position)
                break
            }
            try config.skip(sub.end - config.position)
        }

        switch objectTypeIndication {
        case 0x40:
            guard let asc, !asc.isEmpty else { throw .corrupt("esds has no AudioSpecificConfig") }
            return try parseASC(asc, entryChannels: entryChannels)
        case 0x66, 0x67:  // MPEG-2 AAC Main, LC
            if let asc, !asc.isEmpty { return try parseASC(asc, entryChannels: entryChannels) }
            let objectType = Int(objectTypeIndication) - 0x65
            guard entryRate > 0, entryChannels > 0 else { throw .corrupt("MPEG-2 AAC track without rate or channels") }
            let synthesized = synthesizeASC(objectType: objectType, rate: entryRate, channels: entryChannels)
            return AudioConfig(asc: synthesized, objectType: objectType, sampleRate: entryRate,
                               coreSampleRate: entryRate, channels: entryChannels)
        default:
            let names: [UInt8: String] = [
                0x68: "MPEG-2 AAC SSR", 0x69: "MP3", 0x6B: "MP3", 0xA5: "AC-3", 0xA6: "E-AC-3",
                0xA9: "DTS", 0xAD: "Opus", 0xDD: "Vorbis", 0xE1: "QCELP",
            ]
            let suffix = names[objectTypeIndication].map { " (\($0))" } ?? ""
            throw .unsupportedCodec("mp4a object type 0x\(hex(UInt64(objectTypeIndication), digits: 2))\(suffix)")
        }
    }

    private func synthesizeASC(objectType: Int, rate: Int, channels: Int) -> [UInt8] {
        var bits: [Bool] = []
        func put(_ value: Int, _ count: Int) {
            for shift in stride(from: count - 1, through: 0, by: -1) { bits.append((value >> shift) & 1 == 1) }
        }
        put(objectType, 5)
        if let index = aacSampleRates.firstIndex(of: rate) {
            put(index, 4)
        } else {
            put(15, 4)
            put(rate, 24)
        }
        put(min(channels, 7), 4)
        put(0, 3)  // frame length 1024, no core coder, no extension
        while bits.count % 8 != 0 { bits.append(false) }
        var out: [UInt8] = []
        for start in stride(from: 0, to: bits.count, by: 8) {
            var byte: UInt8 = 0
            for bit in bits[start..<(start + 8)] { byte = byte << 1 | (bit ? 1 : 0) }
            out.append(byte)
        }
        return out
    }

    // MARK: AudioSpecificConfig

    func parseASC(_ asc: [UInt8], entryChannels: Int) throws(MP4Error) -> AudioConfig {
        guard asc.count <= 4096 else { throw .corrupt("AudioSpecificConfig is too large (\(asc.count) bytes)") }
        var reader = MP4BitReader(bytes: asc)
        var objectType = try reader.audioObjectType()
        let coreRate = try reader.samplingRate()
        let channelConfiguration = Int(try reader.read(4))
        var outputRate = coreRate
        var baseType = objectType
        var explicitExtension = false
        if objectType == 5 || objectType == 29 {
            explicitExtension = true
            outputRate = try reader.samplingRate()
            baseType = try reader.audioObjectType()
            if baseType == 22 { _ = try reader.read(4) }
        }
        let configurationChannels = [0, 1, 2, 3, 4, 5, 6, 8, 0, 0, 0, 7, 8, 24, 8, 0]
        var channels = configurationChannels[channelConfiguration & 15]

        let supported: Set<Int> = [1, 2, 4, 17, 19, 23]  // what faad2 decodes
        guard supported.contains(baseType) else {
            let names = [
                0: "null", 3: "SSR", 6: "scalable", 7: "TwinVQ", 8: "CELP", 20: "ER scalable", 22: "ER BSAC",
                32: "MPEG Layer-1", 33: "MPEG Layer-2", 34: "MP3", 36: "ALS", 37: "SLS", 39: "ELD",
                42: "USAC/xHE-AAC",
            ]
            let suffix = names[baseType].map { " (\($0))" } ?? ""
            throw .unsupportedCodec("AAC audio object type \(baseType)\(suffix)")
        }
        // GASpecificConfig
        _ = try reader.read(1)                              // frameLengthFlag
        if try reader.read(1) == 1 { _ = try reader.read(14) }  // coreCoderDelay
        let extensionFlag = try reader.read(1)
        if channelConfiguration == 0 { channels = try reader.programConfigElementChannels() }
        if extensionFlag == 1 {
            if [17, 19, 23].contains(baseType) { _ = try reader.read(3) }  // resilience flags
            _ = try reader.read(1)                                          // extensionFlag3
        }
        // Backward-compatible SBR/PS signalling (best effort).
        if !explicitExtension, reader.bitsLeft >= 16 {
            var tail = reader
            if (try? tail.read(11)) == 0x2B7, (try? tail.audioObjectType()) == 5, (try? tail.read(1)) == 1,
               let rate = try? tail.samplingRate() {
                outputRate = rate
                objectType = 5
                if tail.bitsLeft >= 12, (try? tail.read(11)) == 0x548, (try? tail.read(1)) == 1 { objectType = 29 }
            }
        }
        if channels == 0 { channels = entryChannels }
        guard channels > 0 else { throw .corrupt("the audio track's channel count is unknown") }
        return AudioConfig(asc: asc, objectType: objectType, sampleRate: outputRate, coreSampleRate: coreRate,
                           channels: channels)
    }

    // MARK: trim

    struct Trim {
        var priming: Int64
        var validDuration: Int64?
        var source: TrimSource
    }

    func computeTrim(
        trak: MP4Box, mediaTimescale: UInt32, movieTimescale: UInt32, totalDuration: UInt64, sampleRate: Int,
        smpb: String?
    ) -> Trim {
        let rate = UInt64(sampleRate)
        let timescale = UInt64(mediaTimescale)
        func toFrames(_ value: UInt64) -> Int64? {
            scaleRounded(value, rate, timescale).flatMap { Int64(exactly: $0) }
        }
        var editTrim: Trim?
        if let edit = try? firstEdit(trak), edit.mediaTime <= totalDuration {
            let available = totalDuration - edit.mediaTime
            var valid: UInt64?
            if edit.segmentDuration > 0, movieTimescale > 0,
               let converted = scaleRounded(edit.segmentDuration, timescale, UInt64(movieTimescale)) {
                valid = min(converted, available)
            }
            // Media time 0 covering everything (to within one movie tick) trims nothing.
            let tick = movieTimescale > 0 ? (timescale + UInt64(movieTimescale) - 1) / UInt64(movieTimescale) : 0
            if edit.mediaTime == 0, valid.map({ available - $0 <= tick }) ?? true {
                editTrim = Trim(priming: 0, validDuration: nil, source: .editList)
            } else if let priming = toFrames(edit.mediaTime) {
                var validFrames = valid.flatMap(toFrames)
                if let frames = validFrames, let total = toFrames(available) { validFrames = min(frames, total) }
                return Trim(priming: priming, validDuration: validFrames, source: .editList)
            }
        }
        if let smpb, let trim = parseSMPB(smpb, totalFrames: toFrames(totalDuration)) { return trim }
        return editTrim ?? Trim(priming: 0, validDuration: nil, source: .none)
    }

    /// The first non-empty edit (media_time ≥ 0) of `edts/elst`. Empty edits before it (a
    /// leading delay) are ignored, as is any edit after it.
    private func firstEdit(_ trak: MP4Box) throws(MP4Error) -> (segmentDuration: UInt64, mediaTime: UInt64)? {
        guard let edts = try child(FourCC.edts, of: trak), let elst = try child(FourCC.elst, of: edts) else {
            return nil
        }
        var cursor = MP4Cursor(bytes, payloadOf: elst)
        let version = try cursor.u8()
        try cursor.skip(3)
        let count = try cursor.u32()
        let entries = try stub(elst).extent
        let entrySize: UInt64 = version == 1 ? 20 : 12
        guard UInt64(count) * entrySize <= entries.length else {
            throw .corrupt("elst claims \(count) entries but its box holds only \(entries.length / entrySize)")
        }
        // Entries are read from the file; the loop ends at the first non-empty edit.
        let window = MP4Window(reader, capacity: 1024)
        var at = entries.offset
        for _ in 0..<count {
            let segment: UInt64
            let mediaTime: Int64
            if version == 1 {
                segment = try window.u64(at: at)
                mediaTime = Int64(bitPattern: try window.u64(at: at + 8))
            } else {
                segment = UInt64(try window.u32(at: at))
                mediaTime = Int64(Int32(bitPattern: try window.u32(at: at + 4)))
            }
            let mediaRate = try window.u32(at: at + entrySize - 4)
            if mediaTime >= 0, mediaRate != 0 { return (segment, UInt64(mediaTime)) }
            at += entrySize
        }
        return nil
    }

    /// ` 00000000 DELAY PADDING ORIGINAL_LENGTH …` (hex).
    private func parseSMPB(_ text: String, totalFrames: Int64?) -> Trim? {
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\0" })
        guard fields.count >= 4,
              let delay = UInt64(fields[1], radix: 16), let priming = Int64(exactly: delay),
              let padding = UInt64(fields[2], radix: 16), let original = UInt64(fields[3], radix: 16)
        else { return nil }
        var valid: Int64?
        if original > 0 {
            valid = Int64(exactly: original)
        } else if let totalFrames, let padding = Int64(exactly: padding) {
            let (rest, overflow) = totalFrames.subtractingReportingOverflow(priming)
            if !overflow, rest > padding { valid = rest - padding }
        }
        return Trim(priming: priming, validDuration: valid, source: .iTunSMPB)
    }

    // MARK: tags

    /// Tags and the iTunSMPB text from a `meta` box (full box or QuickTime-style).
    func parseMeta(_ meta: MP4Box) throws(MP4Error) -> (MP4Tags, String?) {
        var start = meta.body + 4  // ISO: version and flags first
        if let type = bytes.mp4BE32(meta.body + 4), Self.quickTimeMetaChildren.contains(type) {
            start = meta.body  // QuickTime: children right away
        }
        var tags = MP4Tags()
        var smpb: String?
        var children = MP4BoxIterator(bytes, from: start, to: meta.end, parent: "meta")
        while let box = try children.next() {
            guard box.type == FourCC.ilst else { continue }
            var items = MP4BoxIterator(bytes, children: box)
            while let item = try items.next() {
                switch item.type {
                case FourCC.title: tags.title = tags.title ?? (try? dataString(item))
                case FourCC.artist: tags.artist = tags.artist ?? (try? dataString(item))
                case FourCC.album: tags.album = tags.album ?? (try? dataString(item))
                case FourCC.aART: tags.albumArtist = tags.albumArtist ?? (try? dataString(item))
                case FourCC.freeform:
                    if smpb == nil, let text = try? freeformSMPB(item) { smpb = text }
                default: break
                }
            }
            break
        }
        return (tags, smpb)
    }

    /// The text of the first `data` child (UTF-8, or UTF-16BE for type 2); nil if empty.
    private func dataString(_ item: MP4Box) throws(MP4Error) -> String? {
        guard let data = try child(FourCC.data, of: item) else { return nil }
        var cursor = MP4Cursor(bytes, payloadOf: data)
        let type = try cursor.u32() & 0x00FF_FFFF
        try cursor.skip(4)  // locale
        var payload = try cursor.take(cursor.remaining)
        while payload.last == 0 { payload.removeLast() }
        let text: String
        switch type {
        case 0, 1:
            text = String(decoding: payload, as: UTF8.self)
        case 2:
            var units: [UInt16] = []
            units.reserveCapacity(payload.count / 2)
            var index = 0
            while index + 1 < payload.count {
                units.append(UInt16(payload[index]) << 8 | UInt16(payload[index + 1]))
                index += 2
            }
            while units.last == 0 { units.removeLast() }
            text = String(decoding: units, as: UTF16.self)
        default:
            return nil
        }
        return text.isEmpty ? nil : text
    }

    private func freeformSMPB(_ item: MP4Box) throws(MP4Error) -> String? {
        var mean: String?
        var name: String?
        var value: String?
        var children = MP4BoxIterator(bytes, children: item)
        while let box = try children.next() {
            switch box.type {
            case FourCC.mean, FourCC.name:
                var cursor = MP4Cursor(bytes, payloadOf: box)
                try cursor.skip(4)
                let text = String(decoding: try cursor.take(cursor.remaining), as: UTF8.self)
                if box.type == FourCC.mean { mean = text } else { name = text }
            case FourCC.data:
                if value == nil { value = try dataString(item) }
            default: break
            }
        }
        guard mean == "com.apple.iTunes", name?.lowercased() == "itunsmpb" else { return nil }
        return value
    }
}

fileprivate let aacSampleRates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350]

fileprivate struct MP4BitReader {
    let bytes: [UInt8]
    var bitPosition = 0

    var bitsLeft: Int { bytes.count * 8 - bitPosition }

    mutating func read(_ count: Int) throws(MP4Error) -> UInt32 {
        guard count >= 0, count <= 32, count <= bitsLeft else { throw .corrupt("AudioSpecificConfig is too short") }
        var value: UInt32 = 0
        for _ in 0..<count {
            let bit = (bytes[bitPosition >> 3] >> (7 - UInt8(bitPosition & 7))) & 1
            value = value << 1 | UInt32(bit)
            bitPosition += 1
        }
        return value
    }

    mutating func audioObjectType() throws(MP4Error) -> Int {
        let type = Int(try read(5))
        return type == 31 ? 32 + Int(try read(6)) : type
    }

    mutating func samplingRate() throws(MP4Error) -> Int {
        let index = Int(try read(4))
        let rate: Int
        if index == 15 {
            rate = Int(try read(24))
        } else {
            guard index < aacSampleRates.count else {
                throw .corrupt("AudioSpecificConfig has a reserved sampling frequency index \(index)")
            }
            rate = aacSampleRates[index]
        }
        guard rate > 0 else { throw .corrupt("AudioSpecificConfig has a sampling rate of 0") }
        return rate
    }

    /// Parses a program_config_element and returns its channel count.
    mutating func programConfigElementChannels() throws(MP4Error) -> Int {
        _ = try read(10)  // element_instance_tag, object_type, sampling_frequency_index
        let front = try read(4), side = try read(4), back = try read(4)
        let lfe = try read(2), assoc = try read(3), cc = try read(4)
        if try read(1) == 1 { _ = try read(4) }  // mono mixdown
        if try read(1) == 1 { _ = try read(4) }  // stereo mixdown
        if try read(1) == 1 { _ = try read(3) }  // matrix mixdown
        var channels = 0
        for _ in 0..<(front + side + back) {
            channels += try read(1) == 1 ? 2 : 1
            _ = try read(4)
        }
        channels += Int(lfe)
        for _ in 0..<lfe { _ = try read(4) }
        for _ in 0..<assoc { _ = try read(4) }
        for _ in 0..<cc { _ = try read(5) }
        let align = (8 - bitPosition % 8) % 8
        _ = try read(align)
        let commentBytes = Int(try read(8))
        for _ in 0..<commentBytes { _ = try read(8) }
        return channels
    }
}


// MARK: - Reading the file through a window

/// Reads a file through one small window: sequential reads of table entries cost one `read`
/// per window, random reads one per miss. Memory: `capacity` bytes.
final class MP4Window {
    private let reader: any MP4ByteReader
    let capacity: Int
    private var base: UInt64 = 0
    private var buffer: [UInt8] = []

    init(_ reader: any MP4ByteReader, capacity: Int = 4096) {
        self.reader = reader
        self.capacity = capacity
    }

    var fileSize: UInt64 { reader.size }

    /// The index in `buffer` of `offset`, after making `count` bytes from there available
    /// (fewer only at the end of the file).
    private func load(_ offset: UInt64, _ count: Int) throws(MP4Error) -> Int {
        if offset >= base, offset - base <= UInt64(buffer.count), buffer.count - Int(offset - base) >= count {
            return Int(offset - base)
        }
        buffer = try mp4Read(reader, at: offset, count: max(capacity, count))
        base = offset
        return 0
    }

    /// Up to `count` bytes at `offset` (fewer only at the end of the file).
    func bytes(at offset: UInt64, count: Int) throws(MP4Error) -> ArraySlice<UInt8> {
        guard count > 0 else { return [] }
        let start = try load(offset, count)
        return buffer[start..<min(buffer.count, start + count)]
    }

    private func available(_ offset: UInt64, _ count: Int) throws(MP4Error) -> Int {
        let start = try load(offset, count)
        guard buffer.count - start >= count else {
            throw .truncated("the file ends inside a table (at offset \(offset), \(fileSize) bytes in all)")
        }
        return start
    }

    func u8(at offset: UInt64) throws(MP4Error) -> UInt8 {
        buffer[try available(offset, 1)]
    }

    func u16(at offset: UInt64) throws(MP4Error) -> UInt16 {
        let i = try available(offset, 2)
        return UInt16(buffer[i]) << 8 | UInt16(buffer[i + 1])
    }

    func u32(at offset: UInt64) throws(MP4Error) -> UInt32 {
        let i = try available(offset, 4)
        return UInt32(buffer[i]) << 24 | UInt32(buffer[i + 1]) << 16 | UInt32(buffer[i + 2]) << 8 | UInt32(buffer[i + 3])
    }

    func u64(at offset: UInt64) throws(MP4Error) -> UInt64 {
        let high = try u32(at: offset)
        return UInt64(high) << 32 | UInt64(try u32(at: offset + 4))
    }
}

/// Where a table's entries are in the file: `length` bytes from `offset`.
struct MP4Extent: Sendable, Equatable {
    let offset: UInt64
    let length: UInt64
}

// MARK: - Loading moov

/// Builds the in-memory image of `moov` that `MP4MoovParser` reads, walking the box tree in
/// the file without recursion.
///
/// In the image, containers and the small boxes the parser reads (mvhd, mdhd, hdlr, stsd; tag
/// items' data/mean/name up to 64 KiB each) are as in the file, with normalised 32-bit sizes.
/// The tables (stts, stsc, stsz, stz2, stco, co64, elst) keep only their fixed fields; `tables`
/// maps the image offset of each such box to where its entries are in the file. Every other
/// box is reduced to its header. A child that overruns its parent or has an invalid size is
/// copied as its raw header and ends the parent there, so the parser reports it as before.
struct MP4MoovLoader {
    static let maxImageSize = 4 << 20
    static let maxBoxes = 100_000
    static let maxDepth = 16
    static let maxTagPayload = 64 << 10

    private let reader: any MP4ByteReader
    private let window: MP4Window
    private(set) var image: [UInt8] = []
    private(set) var tables: [Int: MP4Extent] = [:]

    init(reader: some MP4ByteReader) {
        self.reader = reader
        window = MP4Window(reader, capacity: 16 << 10)
    }

    private enum Kind {
        case container
        case whole(limit: Int)
        case table(fixedFields: Int)
        case header
    }

    private struct Parent {
        var position: UInt64
        let end: UInt64
        let imageStart: Int?  // nil for moov itself
        let isIlst: Bool
    }

    private static let containers: Set<UInt32> = [
        FourCC.trak, FourCC.mdia, FourCC.minf, FourCC.stbl, FourCC.edts, FourCC.udta, FourCC.meta, FourCC.ilst,
    ]

    private func kind(of type: UInt32, inIlst: Bool, depth: Int) -> Kind {
        if Self.containers.contains(type) || inIlst { return depth < Self.maxDepth ? .container : .header }
        switch type {
        case FourCC.mvhd, FourCC.mdhd, FourCC.hdlr, FourCC.stsd: return .whole(limit: Self.maxImageSize)
        case FourCC.data, FourCC.mean, FourCC.name: return .whole(limit: Self.maxTagPayload)
        case FourCC.stsz, FourCC.stz2: return .table(fixedFields: 12)
        case FourCC.stts, FourCC.stsc, FourCC.stco, FourCC.co64, FourCC.elst: return .table(fixedFields: 8)
        default: return .header
        }
    }

    private mutating func append(_ bytes: some Sequence<UInt8>) throws(MP4Error) {
        image.append(contentsOf: bytes)
        guard image.count <= Self.maxImageSize else {
            throw .corrupt("the moov box holds more than \(Self.maxImageSize >> 20) MiB of headers")
        }
    }

    private mutating func appendU32(_ value: UInt32) throws(MP4Error) {
        try append([UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16),
                     UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)])
    }

    /// Sets the 32-bit size of the box that starts at `start` in the image to its length so far.
    private mutating func close(_ start: Int) {
        let size = UInt32(image.count - start)  // ≤ maxImageSize
        image[start] = UInt8(size >> 24)
        image[start + 1] = UInt8(truncatingIfNeeded: size >> 16)
        image[start + 2] = UInt8(truncatingIfNeeded: size >> 8)
        image[start + 3] = UInt8(truncatingIfNeeded: size)
    }

    mutating func load(payloadAt start: UInt64, length: UInt64) throws(MP4Error) {
        let (end, overflow) = start.addingReportingOverflow(length)
        guard !overflow else { throw .corrupt("the moov box's size is out of range") }
        var stack = [Parent(position: start, end: end, imageStart: nil, isIlst: false)]
        var boxes = 0
        while let parent = stack.last {
            let top = stack.count - 1
            let remaining = parent.end - parent.position
            if remaining < 8 {
                // QuickTime terminators and padding: kept as they are.
                if remaining > 0 { try append(try window.bytes(at: parent.position, count: Int(remaining))) }
                stack.removeLast()
                if let imageStart = parent.imageStart { close(imageStart) }
                continue
            }
            boxes += 1
            guard boxes <= Self.maxBoxes else { throw .corrupt("the moov box has more than \(Self.maxBoxes) boxes") }
            let header = Array(try window.bytes(at: parent.position, count: Int(min(remaining, 16))))
            guard header.count >= 8, let size32 = header.mp4BE32(0), let type = header.mp4BE32(4) else {
                throw .truncated("the file ends inside the moov box")
            }
            var headerSize: UInt64 = 8
            var size = UInt64(size32)
            var valid = true
            if size32 == 0 {
                size = remaining
            } else if size32 == 1 {
                if let large = header.mp4BE64(8) {
                    size = large
                    headerSize = 16
                } else {
                    valid = false
                }
            }
            if !valid || size > remaining || size < headerSize {
                // Left for the parser to report: the raw header, and nothing after it.
                try append(header)
                stack[top].position = parent.end
                continue
            }
            let body = parent.position + headerSize
            let boxEnd = parent.position + size  // size ≤ remaining
            stack[top].position = boxEnd
            let boxStart = image.count
            try appendU32(0)
            try appendU32(type)
            let payload = size - headerSize
            switch kind(of: type, inIlst: parent.isIlst, depth: stack.count) {
            case .container:
                var childStart = body
                if type == FourCC.meta {
                    // ISO meta is a full box (version and flags first); QuickTime's has its
                    // children at once. The parser makes the same choice on the image.
                    let peek = Array(try window.bytes(at: body, count: Int(min(payload, 8))))
                    let quickTime = peek.mp4BE32(4).map(MP4MoovParser.quickTimeMetaChildren.contains) ?? false
                    if !quickTime {
                        try append(peek.prefix(4))
                        childStart = body + UInt64(min(4, peek.count))
                    }
                }
                stack.append(Parent(position: childStart, end: boxEnd, imageStart: boxStart, isIlst: type == FourCC.ilst))
                continue
            case .whole(let limit):
                if payload <= UInt64(min(limit, Self.maxImageSize - image.count)) {
                    let bytes = try mp4Read(reader, at: body, count: Int(payload))
                    guard UInt64(bytes.count) == payload else { throw .truncated("the file ends inside the moov box") }
                    try append(bytes)
                } else if limit == Self.maxImageSize {
                    throw .corrupt("the moov box holds more than \(Self.maxImageSize >> 20) MiB of headers ('\(fourCCName(type))' box of \(payload) bytes)")
                }
            case .table(let fixedFields):
                let fixed = Int(min(payload, UInt64(fixedFields)))
                try append(try window.bytes(at: body, count: fixed))
                tables[boxStart] = MP4Extent(offset: body + UInt64(fixed), length: payload - UInt64(fixed))
            case .header:
                break
            }
            close(boxStart)
        }
    }
}

// MARK: - Sample table

/// The sample table of a track, read from the file on demand: sizes (stsz/stz2), chunk
/// offsets (stco/co64), samples per chunk (stsc) and durations (stts).
///
/// `build` checks every sample once (it lies inside the file, the tables agree) in time
/// proportional to the tables' real size, and records at most `maxCheckpoints` positions of
/// each kind; a lookup starts from the nearest one (or from the last lookup, so sequential
/// reading costs O(1) per sample). Memory: four 4-KiB windows and the checkpoints.
final class MP4SampleTable {
    static let maxCheckpoints = 2048

    let sampleCount: Int
    let totalDuration: UInt64
    let maxSampleSize: UInt32

    /// Where sample `sample` lies: in chunk `chunk` (whose stsc entry is `stsc` and whose first
    /// sample is `chunkFirstSample`), at file offset `offset`.
    struct Position {
        var sample: Int
        var chunk: Int
        var stsc: Int
        var chunkFirstSample: Int
        var offset: UInt64
    }

    /// The start of stts entry `entry`: its first sample and decode time.
    struct TimeMark {
        var entry: Int
        var firstSample: Int
        var startTime: UInt64
    }

    private enum Sizes {
        case uniform(UInt32)
        case stsz(MP4Window, MP4Extent)
        case stz2(MP4Window, MP4Extent, bits: Int)
    }

    private let sizes: Sizes
    private let chunks: MP4Window
    private let chunkExtent: MP4Extent
    private let wideChunks: Bool
    private let chunkCount: Int
    private let stsc: MP4Window
    private let stscExtent: MP4Extent
    private let stscCount: Int  // entries that start at an existing chunk
    private let stts: MP4Window
    private let sttsExtent: MP4Extent
    private let sttsCount: Int
    private let positions: [Position]
    private let timeMarks: [TimeMark]
    private var cursor: Position?

    private init(
        sampleCount: Int, totalDuration: UInt64, maxSampleSize: UInt32, sizes: Sizes,
        chunks: MP4Window, chunkExtent: MP4Extent, wideChunks: Bool, chunkCount: Int,
        stsc: MP4Window, stscExtent: MP4Extent, stscCount: Int,
        stts: MP4Window, sttsExtent: MP4Extent, sttsCount: Int,
        positions: [Position], timeMarks: [TimeMark]
    ) {
        self.sampleCount = sampleCount
        self.totalDuration = totalDuration
        self.maxSampleSize = maxSampleSize
        self.sizes = sizes
        self.chunks = chunks
        self.chunkExtent = chunkExtent
        self.wideChunks = wideChunks
        self.chunkCount = chunkCount
        self.stsc = stsc
        self.stscExtent = stscExtent
        self.stscCount = stscCount
        self.stts = stts
        self.sttsExtent = sttsExtent
        self.sttsCount = sttsCount
        self.positions = positions
        self.timeMarks = timeMarks
    }

    var memory: Int {
        var windows = chunks.capacity + stsc.capacity + stts.capacity
        switch sizes {
        case .uniform: break
        case .stsz(let window, _), .stz2(let window, _, _): windows += window.capacity
        }
        return windows + positions.capacity * MemoryLayout<Position>.stride
            + timeMarks.capacity * MemoryLayout<TimeMark>.stride
    }

    // MARK: entries

    private static func size(_ sizes: Sizes, of sample: Int) throws(MP4Error) -> UInt32 {
        switch sizes {
        case .uniform(let size):
            return size
        case .stsz(let window, let extent):
            return try window.u32(at: extent.offset + UInt64(sample) * 4)
        case .stz2(let window, let extent, let bits):
            switch bits {
            case 4:
                let byte = try window.u8(at: extent.offset + UInt64(sample / 2))
                return UInt32(sample % 2 == 0 ? byte >> 4 : byte & 0x0F)
            case 8:
                return UInt32(try window.u8(at: extent.offset + UInt64(sample)))
            default:
                return UInt32(try window.u16(at: extent.offset + UInt64(sample) * 2))
            }
        }
    }

    private static func chunkOffset(_ window: MP4Window, _ extent: MP4Extent, wide: Bool, _ chunk: Int) throws(MP4Error) -> UInt64 {
        wide ? try window.u64(at: extent.offset + UInt64(chunk) * 8)
             : UInt64(try window.u32(at: extent.offset + UInt64(chunk) * 4))
    }

    /// (first chunk, 1-based; samples per chunk) of stsc entry `index`.
    private static func stscEntry(_ window: MP4Window, _ extent: MP4Extent, _ index: Int) throws(MP4Error) -> (UInt32, UInt32) {
        let at = extent.offset + UInt64(index) * 12
        return (try window.u32(at: at), try window.u32(at: at + 4))
    }

    /// (sample count, sample delta) of stts entry `index`.
    private static func sttsEntry(_ window: MP4Window, _ extent: MP4Extent, _ index: Int) throws(MP4Error) -> (UInt32, UInt32) {
        let at = extent.offset + UInt64(index) * 8
        return (try window.u32(at: at), try window.u32(at: at + 4))
    }

    // MARK: building

    /// The stub of a table box in the moov image, and where its entries are.
    struct Stub {
        let box: MP4Box
        let extent: MP4Extent
    }

    /// Reads and checks the tables. `timescale` bounds the sample durations (no AAC frame
    /// lasts a second).
    static func build(
        stts sttsBox: Stub, stsc stscBox: Stub, sizes sizeBox: Stub, chunks chunkBox: Stub,
        image: [UInt8], reader: any MP4ByteReader, timescale: UInt32
    ) throws(MP4Error) -> MP4SampleTable {
        let fileSize = reader.size

        /// Throws unless `count` entries of `entrySize` bytes fit in the table's entries.
        func require(_ stub: Stub, _ count: UInt32, _ entrySize: UInt64, _ name: String) throws(MP4Error) {
            guard UInt64(count) * entrySize <= stub.extent.length else {
                throw .corrupt("\(name) claims \(count) entries but its box holds only \(stub.extent.length / entrySize)")
            }
        }

        // Sample sizes.
        let sizes: Sizes
        var sizeCount: UInt32
        var cursor = MP4Cursor(image, payloadOf: sizeBox.box)
        try cursor.skip(4)
        if sizeBox.box.type == FourCC.stsz {
            let uniform = try cursor.u32()
            sizeCount = try cursor.u32()
            if uniform == 0 {
                try require(sizeBox, sizeCount, 4, "stsz")
                sizes = .stsz(MP4Window(reader), sizeBox.extent)
            } else {
                guard UInt64(sizeCount) * UInt64(uniform) <= fileSize else {
                    throw .truncated("stsz: \(sizeCount) samples of \(uniform) bytes exceed the file size")
                }
                sizes = .uniform(uniform)
            }
        } else {
            try cursor.skip(3)
            let fieldSize = try cursor.u8()
            sizeCount = try cursor.u32()
            guard fieldSize == 4 || fieldSize == 8 || fieldSize == 16 else {
                throw .corrupt("stz2 has an invalid field size \(fieldSize)")
            }
            let needed = (UInt64(sizeCount) * UInt64(fieldSize) + 7) / 8
            guard needed <= sizeBox.extent.length else {
                throw .corrupt("stz2 claims \(sizeCount) entries but its box holds only \(sizeBox.extent.length * 8 / UInt64(fieldSize))")
            }
            sizes = .stz2(MP4Window(reader), sizeBox.extent, bits: Int(fieldSize))
        }

        // Durations: the sample count is the smaller of stsz and stts.
        let sttsWindow = MP4Window(reader)
        cursor = MP4Cursor(image, payloadOf: sttsBox.box)
        try cursor.skip(4)
        let runCount = try cursor.u32()
        try require(sttsBox, runCount, 8, "stts")
        let sizeTotal = Int(sizeCount)
        let runStride = max(64, Int(runCount) / maxCheckpoints + 1)
        var timeMarks: [TimeMark] = []
        var sample = 0
        var time: UInt64 = 0
        var entry = 0
        while entry < Int(runCount), sample < sizeTotal {
            let (count, delta) = try sttsEntry(sttsWindow, sttsBox.extent, entry)
            if entry % runStride == 0 { timeMarks.append(TimeMark(entry: entry, firstSample: sample, startTime: time)) }
            entry += 1
            guard count > 0 else { continue }
            guard delta <= timescale else {
                throw .corrupt("stts gives sample \(sample) a duration of \(delta) at a timescale of \(timescale) per second (\(delta / timescale) s); an AAC frame lasts a few milliseconds")
            }
            let taken = min(Int(count), sizeTotal - sample)
            let (span, spanOverflow) = UInt64(taken).multipliedReportingOverflow(by: UInt64(delta))
            let (next, overflow) = time.addingReportingOverflow(span)
            guard !spanOverflow, !overflow else { throw .corrupt("stts durations overflow") }
            time = next
            sample += taken
        }
        let sampleCount = sample
        let usedRuns = entry
        let empty = MP4Extent(offset: 0, length: 0)
        guard sampleCount > 0 else {
            return MP4SampleTable(
                sampleCount: 0, totalDuration: 0, maxSampleSize: 0, sizes: .uniform(0),
                chunks: MP4Window(reader, capacity: 0), chunkExtent: empty, wideChunks: false, chunkCount: 0,
                stsc: MP4Window(reader, capacity: 0), stscExtent: empty, stscCount: 0,
                stts: MP4Window(reader, capacity: 0), sttsExtent: empty, sttsCount: 0, positions: [], timeMarks: [])
        }

        // Chunk offsets.
        cursor = MP4Cursor(image, payloadOf: chunkBox.box)
        try cursor.skip(4)
        let chunkCount = try cursor.u32()
        let wide = chunkBox.box.type == FourCC.co64
        try require(chunkBox, chunkCount, wide ? 8 : 4, wide ? "co64" : "stco")
        let chunkWindow = MP4Window(reader)

        // Sample-to-chunk runs: the first starts at chunk 1, chunk numbers increase; runs
        // past the last chunk are ignored.
        cursor = MP4Cursor(image, payloadOf: stscBox.box)
        try cursor.skip(4)
        let stscTotal = try cursor.u32()
        try require(stscBox, stscTotal, 12, "stsc")
        let stscWindow = MP4Window(reader)
        var stscCount = 0
        var previous: UInt32 = 0
        while stscCount < Int(stscTotal) {
            let (first, _) = try stscEntry(stscWindow, stscBox.extent, stscCount)
            if stscCount == 0, first != 1 { throw .corrupt("stsc does not start at chunk 1") }
            guard first <= chunkCount else { break }
            if stscCount > 0, first <= previous { throw .corrupt("stsc chunk numbers are not increasing") }
            previous = first
            stscCount += 1
        }
        guard stscCount > 0 else { throw .corrupt("stsc is empty") }

        // Every sample, checked against the file size; checkpoints for random access.
        let stride = max(1024, (sampleCount + Int(chunkCount)) / maxCheckpoints + 1)
        var positions: [Position] = []
        var maxSize: UInt32 = 0
        var run = 0
        var perChunk: UInt32 = 0
        var nextRunChunk = 0  // 0-based chunk where stsc entry `run + 1` starts (Int.max: none)
        sample = 0
        var chunk = 0
        while chunk < Int(chunkCount), sample < sampleCount {
            if chunk == 0 || chunk >= nextRunChunk {
                if chunk > 0 { run += 1 }
                perChunk = try stscEntry(stscWindow, stscBox.extent, run).1
                nextRunChunk = run + 1 < stscCount ? Int(try stscEntry(stscWindow, stscBox.extent, run + 1).0) - 1 : Int.max
            }
            let offset = try chunkOffset(chunkWindow, chunkBox.extent, wide: wide, chunk)
            let inChunk = min(Int(perChunk), sampleCount - sample)
            if positions.isEmpty || sample - positions[positions.count - 1].sample >= stride
                || chunk - positions[positions.count - 1].chunk >= stride {
                positions.append(Position(sample: sample, chunk: chunk, stsc: run, chunkFirstSample: sample, offset: offset))
            }
            switch sizes {
            case .uniform(let size):
                let (bytes, overflow) = UInt64(inChunk).multipliedReportingOverflow(by: UInt64(size))
                let (end, overflow2) = offset.addingReportingOverflow(bytes)
                if overflow || overflow2 || end > fileSize {
                    let fits = offset < fileSize ? Int((fileSize - offset) / UInt64(size)) : 0
                    throw .truncated("sample \(sample + fits) (offset \(offset &+ UInt64(fits) &* UInt64(size)), \(size) bytes) extends past the end of the file (\(fileSize) bytes)")
                }
                if inChunk > 0 { maxSize = size }
            default:
                var at = offset
                for index in sample..<(sample + inChunk) {
                    let size = try Self.size(sizes, of: index)
                    let (end, overflow) = at.addingReportingOverflow(UInt64(size))
                    guard !overflow, end <= fileSize else {
                        throw .truncated("sample \(index) (offset \(at), \(size) bytes) extends past the end of the file (\(fileSize) bytes)")
                    }
                    if index - positions[positions.count - 1].sample >= stride {
                        positions.append(Position(sample: index, chunk: chunk, stsc: run, chunkFirstSample: sample, offset: at))
                    }
                    maxSize = max(maxSize, size)
                    at = end
                }
            }
            guard maxSize <= MP4File.maxSampleSize else {
                throw .corrupt("an AAC frame of \(maxSize) bytes (the largest possible is under \(MP4File.maxSampleSize >> 10) KiB)")
            }
            sample += inChunk
            chunk += 1
        }
        guard sample == sampleCount else {
            throw .corrupt("stsc/stco place only \(sample) of \(sampleCount) samples in chunks")
        }
        return MP4SampleTable(
            sampleCount: sampleCount, totalDuration: time, maxSampleSize: maxSize, sizes: sizes,
            chunks: chunkWindow, chunkExtent: chunkBox.extent, wideChunks: wide, chunkCount: Int(chunkCount),
            stsc: stscWindow, stscExtent: stscBox.extent, stscCount: stscCount,
            stts: sttsWindow, sttsExtent: sttsBox.extent, sttsCount: usedRuns,
            positions: positions, timeMarks: timeMarks)
    }

    // MARK: lookups

    /// The last element of a sorted array whose key is ≤ `value` (the first when none is).
    private static func lastIndex<T>(in array: [T], atMost value: UInt64, key: (T) -> UInt64) -> Int {
        var low = 0
        var high = array.count - 1
        while low < high {
            let mid = low + (high - low + 1) / 2
            if key(array[mid]) <= value { low = mid } else { high = mid - 1 }
        }
        return low
    }

    func sample(at index: Int) throws(MP4Error) -> (offset: UInt64, size: UInt32) {
        guard index >= 0, index < sampleCount, !positions.isEmpty else { return (0, 0) }
        var position = positions[Self.lastIndex(in: positions, atMost: UInt64(index)) { UInt64($0.sample) }]
        if let cursor, cursor.sample <= index, cursor.sample >= position.sample { position = cursor }
        // Forward to the chunk that holds `index`, then to the sample. Every step stays
        // within what `build` checked, so nothing overflows.
        while true {
            let inChunk = min(Int(try Self.stscEntry(stsc, stscExtent, position.stsc).1), sampleCount - position.chunkFirstSample)
            let chunkEnd = position.chunkFirstSample + inChunk
            if index < chunkEnd { break }
            position.chunk += 1
            guard position.chunk < chunkCount else { return (0, 0) }  // cannot happen after build
            while position.stsc + 1 < stscCount,
                  Int(try Self.stscEntry(stsc, stscExtent, position.stsc + 1).0) - 1 <= position.chunk {
                position.stsc += 1
            }
            position.chunkFirstSample = chunkEnd
            position.sample = chunkEnd
            position.offset = try Self.chunkOffset(chunks, chunkExtent, wide: wideChunks, position.chunk)
        }
        switch sizes {
        case .uniform(let size):
            position.offset += UInt64(index - position.sample) * UInt64(size)
        default:
            for i in position.sample..<index { position.offset += UInt64(try Self.size(sizes, of: i)) }
        }
        position.sample = index
        cursor = position
        return (position.offset, try Self.size(sizes, of: index))
    }

    /// Calls `body` with each stts run (first sample, start time, samples taken, delta) from
    /// the time mark at `mark` on, until it returns a value.
    private func walkRuns<R>(from mark: TimeMark, _ body: (Int, UInt64, Int, UInt32) -> R?) throws(MP4Error) -> R? {
        var sample = mark.firstSample
        var time = mark.startTime
        var entry = mark.entry
        while entry < sttsCount, sample < sampleCount {
            let (count, delta) = try Self.sttsEntry(stts, sttsExtent, entry)
            entry += 1
            guard count > 0 else { continue }
            let taken = min(Int(count), sampleCount - sample)
            if let result = body(sample, time, taken, delta) { return result }
            time += UInt64(taken) * UInt64(delta)  // ≤ totalDuration, checked by build
            sample += taken
        }
        return nil
    }

    private func mark(containingSample index: Int) -> TimeMark {
        timeMarks[Self.lastIndex(in: timeMarks, atMost: UInt64(index)) { UInt64($0.firstSample) }]
    }

    func duration(ofSample index: Int) throws(MP4Error) -> UInt32 {
        guard index >= 0, index < sampleCount, !timeMarks.isEmpty else { return 0 }
        return try walkRuns(from: mark(containingSample: index)) { first, _, taken, delta in
            index < first + taken ? delta : nil
        } ?? 0
    }

    func decodeTime(ofSample index: Int) throws(MP4Error) -> UInt64 {
        guard index > 0 else { return 0 }
        guard index < sampleCount, !timeMarks.isEmpty else { return totalDuration }
        return try walkRuns(from: mark(containingSample: index)) { first, start, taken, delta in
            index < first + taken ? start + UInt64(index - first) * UInt64(delta) : nil
        } ?? totalDuration
    }

    func sampleIndex(atTime time: UInt64) throws(MP4Error) -> Int {
        guard time < totalDuration, !timeMarks.isEmpty else { return sampleCount }
        let mark = timeMarks[Self.lastIndex(in: timeMarks, atMost: time) { $0.startTime }]
        return try walkRuns(from: mark) { first, start, taken, delta in
            let span = UInt64(taken) * UInt64(delta)
            guard time < start + span else { return nil }  // zero-length runs hold no time
            return first + Int((time - start) / UInt64(delta))
        } ?? sampleCount
    }
}
