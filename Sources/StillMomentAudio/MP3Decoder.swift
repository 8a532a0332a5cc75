// MP3Decoder.swift — MPEG audio through libmpg123: gapless, one output format for the whole file.
import CFileIO
import CMpg123
import Glibc
import Synchronization

private let mpg123Initialised: Bool = {
    mpg123_init()
    return true
}()

/// MPEG audio (MPEG 1, 2, 2.5; layers 1-3) through libmpg123, with gapless decoding on:
/// the encoder delay and padding from a LAME/Xing tag are removed.
///
/// The output format is the first frame's rate and channel count, for the whole file. When
/// the stream changes format midway (two files joined, say 44.1-kHz stereo then 22.05-kHz
/// mono), libmpg123 converts the rest to that format (its resampler and channel mapping) and
/// says so with MPG123_NEW_FORMAT; a change it cannot convert is an error, never silence. A
/// file whose stream changes format or continues past its Xing/Info length is decoded once
/// when opened to learn its exact length, since neither the tag nor libmpg123's frame count
/// gives it then.
public final class MP3Decoder: AudioDecoder {
    public let format: AudioFormat
    public private(set) var totalFrames: Int64?
    public let probe: MPEGProbe
    private let file: AudioFile
    private let handle: OpaquePointer
    /// What libmpg123 reads the file through (buffered preads: cfileio.h, sm_reader).
    private let reader: OpaquePointer

    /// `exactLength: false` leaves a joined stream's length an estimate instead of decoding
    /// the whole file once more to count it: for a caller that decodes it all anyway and
    /// counts as it goes (the import's analysis and its playability probe).
    /// `knownFrames`: the length counted when the file was imported (the whole file decoded
    /// then). Taken as it is: a file without a Xing tag is not scanned for its length at
    /// every open (28 ms for 10 minutes of MP3 here, twice at each start of a guided
    /// meditation, and once more at each seek before the mixer kept its decoders).
    /// `knownIndex`: the frame index taken at the import (SeekIndex): a far seek starts
    /// from the nearest indexed frame instead of reading every frame before it.
    public init(file: AudioFile, probe: MPEGProbe, exactLength: Bool = true, knownFrames: Int64? = nil,
                knownIndex: SeekIndex? = nil) throws(AudioError) {
        _ = mpg123Initialised
        self.file = file
        self.probe = probe
        var err: Int32 = 0
        guard let fileReader = sm_reader_new(file.fd) else {
            // Not the file's fault: say so, and what helps.
            throw AudioError.unreadable(path: file.path, reason: "out of memory for its read buffer; close other programs and try again")
        }
        guard let h = mpg123_new(nil, &err) else {
            sm_reader_free(fileReader)
            throw AudioError.unreadable(path: file.path, reason: "libmpg123 could not start (\(Self.text(err))); close other programs and try again")
        }
        handle = h
        reader = fileReader
        let rate = probe.header.sampleRate
        let channels = probe.header.channels
        mpg123_param2(h, Int32(MPG123_ADD_FLAGS.rawValue), Int(MPG123_GAPLESS.rawValue | MPG123_QUIET.rawValue), 0)
        mpg123_param2(h, Int32(MPG123_REMOVE_FLAGS.rawValue), Int(MPG123_FUZZY.rawValue), 0)
        // Decode at the file's own rate and channel count, always float.
        mpg123_format_none(h)
        mpg123_format(h, rate, channels == 1 ? Int32(MPG123_MONO.rawValue) : Int32(MPG123_STEREO.rawValue),
                      Int32(MPG123_ENC_FLOAT_32.rawValue))
        // Through the buffered reader: libmpg123 on the descriptor read each frame's
        // header and body apart, two system calls a frame (a seek to 55:00 of an MP3
        // without an index read its way there in 275,676 of them).
        guard mpg123_replace_reader_handle(h, sm_reader_read, sm_reader_lseek, nil) == MPG123_OK.rawValue,
              mpg123_open_handle(h, UnsafeMutableRawPointer(fileReader)) == MPG123_OK.rawValue else {
            let detail = String(cString: mpg123_strerror(h))
            mpg123_delete(h)
            sm_reader_free(fileReader)
            throw AudioError.corrupt(path: file.path, detail: detail)
        }
        var r = 0, c: Int32 = 0, e: Int32 = 0
        guard mpg123_getformat(h, &r, &c, &e) == MPG123_OK.rawValue else {
            let detail = String(cString: mpg123_strerror(h))
            mpg123_close(h)
            mpg123_delete(h)
            sm_reader_free(fileReader)
            throw AudioError.corrupt(path: file.path, detail: detail)
        }
        format = AudioFormat(sampleRate: r, channels: Int(c))
        // A Xing/Info tag says how many bytes the stream has: fewer means cut short.
        if let declared = probe.declaredBytes, declared > 0 {
            let present = file.size - probe.firstFrameOffset
            if present + 1024 < UInt64(declared) {
                // self is complete here: deinit closes the handle.
                throw AudioError.truncated(
                    path: file.path, detail: "\(present) of \(declared) bytes of MPEG audio present")
            }
        }
        if let knownIndex, !knownIndex.fileOffsets.isEmpty, Int64(file.size) > knownIndex.offsets.last ?? 0 {
            // Copied by libmpg123 (it only reads the array); a refusal leaves it without
            // (reading its way, as before).
            _ = knownIndex.fileOffsets.withUnsafeBufferPointer { offsets in
                mpg123_set_index(h, UnsafeMutablePointer(mutating: offsets.baseAddress), off_t(knownIndex.step), offsets.count)
            }
        }
        if let knownFrames, knownFrames > 0 {
            totalFrames = knownFrames
            return
        }
        // Without a frame count in a Xing tag, scan the frame headers for the exact length.
        if probe.declaredFrames == nil { mpg123_scan(h) }
        let length = mpg123_length(h)
        totalFrames = length >= 0 ? Int64(length) : nil
        // Joined streams: the Xing length covers only the first, and libmpg123's count assumes
        // one frame size. Count what it really decodes (converted to `format`).
        let joined = try MPEGScan.continuesAfterXingLength(file, probe: probe)
        if joined || probe.declaredFrames == nil, let change = try MPEGScan.firstFormatChange(file, probe: probe) {
            changeNote = "it changes from \(Self.describe(change.from)) to \(Self.describe(change.to)) at \(Self.clock(change.seconds))"
        }
        if exactLength && (joined || changeNote != nil) {
            totalFrames = try countFrames()
        }
    }

    /// Set when the stream changes format: said in an error if libmpg123 cannot convert it.
    private var changeNote: String?

    /// Where the stream changes format, for an error: found at the open (a file without a
    /// Xing tag, or joined streams), else looked for now (an open with its length known).
    private func formatChange() -> String? {
        if let changeNote { return changeNote }
        guard let change = try? MPEGScan.firstFormatChange(file, probe: probe) else { return nil }
        return "it changes from \(Self.describe(change.from)) to \(Self.describe(change.to)) at \(Self.clock(change.seconds))"
    }

    static func describe(_ header: MPEGFrameHeader) -> String {
        "\(header.sampleRate) Hz \(header.channels == 1 ? "mono" : "stereo")"
    }

    static func clock(_ seconds: Double) -> String {
        let tenths = Int((seconds * 10).rounded())
        let s = tenths / 10
        return "\(s / 60):\(s % 60 < 10 ? "0" : "")\(s % 60).\(tenths % 10)"
    }

    /// Decodes the whole file once, counting frames, and goes back to the start.
    private func countFrames() throws(AudioError) -> Int64 {
        var scratch = [Float](repeating: 0, count: 8192 * format.channels)
        var frames: Int64 = 0
        while true {
            let n = try scratch.withStorage { (buf) throws(AudioError) -> Int in
                guard let base = buf.baseAddress else { return 0 }
                return try read(into: base, frames: 8192)
            }
            if n == 0 { break }
            frames += Int64(n)
        }
        let r = mpg123_seek(handle, 0, SEEK_SET)
        chunk = nil
        chunkFrames = 0
        if r < 0 {
            throw AudioError.corrupt(path: file.path, detail: "cannot seek: \(String(cString: mpg123_strerror(handle)))")
        }
        return frames
    }

    deinit {
        mpg123_close(handle)
        mpg123_delete(handle)
        sm_reader_free(reader)
    }

    /// libmpg123's frame index as it stands: complete once the whole file has been read
    /// (the import's analysis). nil when it has none.
    public var seekIndex: SeekIndex? {
        var offsets: UnsafeMutablePointer<off_t>?
        var step: off_t = 0
        var fill = 0
        guard mpg123_index(handle, &offsets, &step, &fill) == MPG123_OK.rawValue, let offsets, fill > 0 else { return nil }
        return SeekIndex(step: Int64(step), offsets: (0..<fill).map { Int64(offsets[$0]) }, fileSize: Int64(file.size))
    }

    /// A file's whole frame index from a scan of its frame headers, without decoding (for
    /// a file imported before the index was kept). nil when it cannot be read.
    public static func scanIndex(_ file: AudioFile, probe: MPEGProbe, knownFrames: Int64) -> SeekIndex? {
        guard let decoder = try? MP3Decoder(file: file, probe: probe, knownFrames: knownFrames),
              mpg123_scan(decoder.handle) == MPG123_OK.rawValue else { return nil }
        return decoder.seekIndex
    }

    /// Reads of the file made so far (the tests count them).
    var fileReads: UInt64 { sm_reader_file_reads(reader) }

    /// The rest of the frame libmpg123 decoded last, in its own buffer: `borrow` hands it
    /// out without a copy (the mixer reads it there), `read` copies from it.
    private var chunk: UnsafePointer<Float>?
    private var chunkFrames = 0

    /// Up to `frames` frames of the frame decoded last (the next is decoded when it is used
    /// up), where libmpg123 put them: valid until the next call on this decoder. Empty only
    /// at the end. (mpg123_read would copy each frame out of that buffer first: 34 M of
    /// the 60-s render's instructions under callgrind.)
    public func borrow(frames: Int) throws(AudioError) -> UnsafeBufferPointer<Float> {
        let channels = format.channels
        while chunkFrames == 0 {
            var audio: UnsafeMutablePointer<UInt8>?
            var bytes = 0
            let rc = mpg123_decode_frame(handle, nil, &audio, &bytes)
            if rc == MPG123_DONE.rawValue { return UnsafeBufferPointer(start: nil, count: 0) }
            if rc == MPG123_NEW_FORMAT.rawValue {
                // Only the one output format is enabled, so libmpg123 converts a new part to
                // it; check that it did rather than reading samples of another layout.
                var r = 0, c: Int32 = 0, e: Int32 = 0
                guard mpg123_getformat(handle, &r, &c, &e) == MPG123_OK.rawValue, r == format.sampleRate,
                      Int(c) == channels, e == Int32(MPG123_ENC_FLOAT_32.rawValue) else {
                    throw AudioError.corrupt(
                        path: file.path,
                        detail: "\(formatChange() ?? "the audio changes format midway") and cannot be converted to \(format); convert the file to one format")
                }
                continue
            }
            if rc != MPG123_OK.rawValue {
                let why = String(cString: mpg123_strerror(handle))
                throw AudioError.corrupt(
                    path: file.path, detail: formatChange().map { "\($0), and libmpg123 cannot convert it: \(why)" } ?? why)
            }
            decodedSinceSeek = true
            // A frame the gapless trim removed entirely comes back empty: decode the next.
            guard let audio, bytes > 0 else { continue }
            chunk = UnsafeRawPointer(audio).assumingMemoryBound(to: Float.self)
            chunkFrames = bytes / (MemoryLayout<Float>.size * channels)
        }
        let n = min(frames, chunkFrames)
        let part = UnsafeBufferPointer(start: chunk, count: n * channels)
        chunk = chunk.map { $0 + n * channels }
        chunkFrames -= n
        return part
    }

    /// How far a seek first goes elsewhere (frames: sixteen of MPEG-1's longest).
    private static let detour: Int64 = 16 * 1152
    /// A frame was decoded since the last seek (libmpg123's synthesis holds what playing
    /// through gives): the next seek needs no detour.
    private var decodedSinceSeek = true

    public func seek(toFrame frame: Int64) throws(AudioError) {
        let target = max(0, min(frame, totalFrames ?? frame))
        // libmpg123 skips a seek when its decoder stands on, or just before, the frame the
        // seek needs (its pre-roll included) and decodes on from there. After a seek that
        // decoded nothing, that left the synthesis without its pre-roll: a paused sit's
        // engine rebases (a seek), then its resume seeks a few ms back, and the first ~700
        // frames came out up to 0.3 off, the error dying away (one node of three in 2 of
        // 14 resumes in the rooms test). A seek elsewhere first makes this one a real seek,
        // pre-roll and all: sixteen frames on (read soon anyway), or to the start near the end.
        // After a decode, libmpg123's own seek is right (a loop's wrap, a seek while playing).
        if !decodedSinceSeek {
            let away = target + Self.detour < (totalFrames ?? 0) ? target + Self.detour : 0
            if abs(away - target) >= Self.detour { _ = mpg123_seek(handle, off_t(away), SEEK_SET) }
        }
        decodedSinceSeek = false
        let r = mpg123_seek(handle, off_t(target), SEEK_SET)
        chunk = nil
        chunkFrames = 0
        if r < 0 {
            throw AudioError.corrupt(path: file.path, detail: "cannot seek: \(String(cString: mpg123_strerror(handle)))")
        }
    }

    static func text(_ err: Int32) -> String { String(cString: mpg123_plain_strerror(err)) }

    /// Title, artist and album from the ID3v2 tag, else the ID3v1 tag (libmpg123).
    public func tags() -> (title: String?, artist: String?, album: String?) {
        // Make sure a trailing ID3v1 tag has been seen.
        if mpg123_meta_check(handle) & MPG123_ID3 == 0 { mpg123_scan(handle) }
        var v1: UnsafeMutablePointer<mpg123_id3v1>?
        var v2: UnsafeMutablePointer<mpg123_id3v2>?
        guard mpg123_id3(handle, &v1, &v2) == MPG123_OK.rawValue else { return (nil, nil, nil) }
        func text(_ s: UnsafeMutablePointer<mpg123_string>?) -> String? {
            guard let s, let p = s.pointee.p, s.pointee.fill > 0 else { return nil }
            return String(cString: p)
        }
        func text<T>(_ field: T) -> String? {
            withUnsafeBytes(of: field) { raw in
                let bytes = raw.prefix { $0 != 0 }
                // ID3v1 is Latin-1.
                let s = String(bytes.map { Character(Unicode.Scalar($0)) })
                return s.isEmpty ? nil : s
            }
        }
        let title = text(v2?.pointee.title) ?? v1.flatMap { text($0.pointee.title) }
        let artist = text(v2?.pointee.artist) ?? v1.flatMap { text($0.pointee.artist) }
        let album = text(v2?.pointee.album) ?? v1.flatMap { text($0.pointee.album) }
        return (title, artist, album)
    }
}
