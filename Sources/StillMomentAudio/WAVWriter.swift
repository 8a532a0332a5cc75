import CAudio
import CFileIO
import Glibc

/// Writes interleaved stereo float frames to a WAV file: 32-bit float (WAVE_FORMAT_IEEE_FLOAT)
/// or 16-bit PCM with TPDF dither. A file past 4 GiB becomes RF64 when it is finished.
/// The data goes to a temporary file beside `path` (created exclusively under a random
/// name, never through a link) and is renamed into place only when complete; until then,
/// and after a failure, `path` is untouched. A `path` that exists and is not a regular
/// file (a device, a link, a folder) is refused.
public final class WAVWriter {
    public enum SampleFormat: Sendable { case float32, int16 }
    public let path: String
    public let sampleRate: Int
    public let channels = 2
    public let sampleFormat: SampleFormat
    public private(set) var framesWritten: Int64 = 0
    private let partPath: String
    private var fd: Int32
    private var buffer: [UInt8] = []
    private var dither: UInt32 = 0x2545F491
    private var convert: [Int16] = []
    private static let headerSize = 80

    public init(path: String, sampleRate: Int, format: SampleFormat = .float32) throws(AudioError) {
        self.path = path
        self.sampleRate = sampleRate
        self.sampleFormat = format
        var st = stat()
        if lstat(path, &st) == 0 && (st.st_mode & S_IFMT) != S_IFREG {
            throw AudioError.output(path: path, reason: "it exists and is not a regular file; choose another name")
        }
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[...$0]) } ?? ""
        let base = slash.map { String(path[path.index(after: $0)...]) } ?? path
        var name = ""
        var created: Int32 = -1
        for _ in 0..<16 {
            name = folder + "." + base.prefix(200) + "." + String(UInt64.random(in: 0...UInt64.max), radix: 36) + ".part"
            created = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
            if created >= 0 || errno != EEXIST { break }
        }
        guard created >= 0 else { throw AudioError.output(path: path, reason: AudioFile.errnoText()) }
        partPath = name
        fd = created
        buffer.reserveCapacity(1 << 18)
        buffer.append(contentsOf: [UInt8](repeating: 0, count: Self.headerSize))
    }

    deinit { discard() }

    /// Drops what was written (a failed render leaves nothing behind).
    public func discard() {
        if fd >= 0 {
            close(fd)
            fd = -1
            unlink(partPath)
        }
    }

    private var bytesPerSample: Int { sampleFormat == .float32 ? 4 : 2 }

    public func write(_ frames: UnsafePointer<Float>, count: Int) throws(AudioError) {
        let samples = count * channels
        switch sampleFormat {
        case .float32:
            try put(UnsafeRawPointer(frames), bytes: samples * 4)
        case .int16:
            if convert.count < samples { convert = [Int16](repeating: 0, count: samples) }
            try convert.withStorage { (out) throws(AudioError) in
                guard let base = out.baseAddress else { return }
                sm_convert_s16(frames, base, samples, &dither)
                try put(UnsafeRawPointer(base), bytes: samples * 2)
            }
        }
        framesWritten += Int64(count)
    }

    /// Small pieces gather in `buffer` (one write per 256 KiB); a block of 16 KiB or more
    /// (an engine block: 4096 frames) goes to the file from where it is, without a copy.
    private func put(_ bytes: UnsafeRawPointer, bytes count: Int) throws(AudioError) {
        if count >= 1 << 14 {
            try flush()
            try writeAll(bytes, count: count)
            return
        }
        buffer.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: count))
        if buffer.count >= 1 << 18 { try flush() }
    }

    /// Bytes written to the file so far, and how far writeback has been started.
    private var fileBytes: Int64 = 0
    private var writebackStarted: Int64 = 0
    private static let writebackChunk: Int64 = 8 << 20

    private func flush() throws(AudioError) {
        guard !buffer.isEmpty else { return }
        try buffer.withStorage { (raw) throws(AudioError) in
            guard let base = raw.baseAddress else { return }
            try writeAll(base, count: raw.count)
        }
        buffer.removeAll(keepingCapacity: true)
    }

    private func writeAll(_ bytes: UnsafeRawPointer, count: Int) throws(AudioError) {
        var offset = 0
        while offset < count {
            let n = Glibc.write(fd, bytes + offset, count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw AudioError.output(path: path, reason: AudioFile.errnoText())
            }
            offset += n
        }
        fileBytes += Int64(count)
        // Start writing back each 8 MiB as it is complete, so the fsync at the end has
        // only the tail to wait for (a long render does not end in a long stall).
        while fileBytes - writebackStarted >= Self.writebackChunk {
            _ = sm_file_start_writeback(fd, writebackStarted, Self.writebackChunk)
            writebackStarted += Self.writebackChunk
        }
    }

    /// Writes the header, syncs and renames the file into place.
    public func finish() throws(AudioError) {
        try flush()
        let header = makeHeader()
        let n = header.withUnsafeBytes { pwrite(fd, $0.baseAddress, header.count, 0) }
        guard n == header.count else { throw AudioError.output(path: path, reason: AudioFile.errnoText()) }
        guard fsync(fd) == 0 else { throw AudioError.output(path: path, reason: AudioFile.errnoText()) }
        close(fd)
        fd = -1
        var st = stat()
        if lstat(path, &st) == 0 && (st.st_mode & S_IFMT) != S_IFREG {
            unlink(partPath)
            throw AudioError.output(path: path, reason: "it was replaced by something that is not a regular file; nothing written")
        }
        guard rename(partPath, path) == 0 else {
            let reason = AudioFile.errnoText()
            unlink(partPath)
            throw AudioError.output(path: path, reason: reason)
        }
    }

    /// RIFF/WAVE (or RF64) header, exactly `headerSize` bytes: the JUNK chunk reserves
    /// room for RF64's ds64 chunk.
    private func makeHeader() -> [UInt8] {
        var h: [UInt8] = []
        func tag(_ s: String) { h.append(contentsOf: Array(s.utf8)) }
        func u16(_ v: Int) { h.append(UInt8(v & 0xFF)); h.append(UInt8((v >> 8) & 0xFF)) }
        func u32(_ v: UInt64) { for i in 0..<4 { h.append(UInt8((v >> (8 * UInt64(i))) & 0xFF)) } }
        func u64(_ v: UInt64) { for i in 0..<8 { h.append(UInt8((v >> (8 * UInt64(i))) & 0xFF)) } }
        let dataBytes = UInt64(framesWritten) * UInt64(channels * bytesPerSample)
        let riffSize = UInt64(Self.headerSize - 8) + dataBytes
        let big = riffSize > UInt64(UInt32.max)
        tag(big ? "RF64" : "RIFF"); u32(big ? 0xFFFF_FFFF : riffSize)
        tag("WAVE")
        if big {
            tag("ds64"); u32(28); u64(riffSize); u64(dataBytes); u64(UInt64(framesWritten)); u32(0)
        } else {
            tag("JUNK"); u32(28); h.append(contentsOf: [UInt8](repeating: 0, count: 28))
        }
        tag("fmt "); u32(16)
        u16(sampleFormat == .float32 ? 3 : 1)
        u16(channels)
        u32(UInt64(sampleRate))
        u32(UInt64(sampleRate * channels * bytesPerSample))
        u16(channels * bytesPerSample)
        u16(bytesPerSample * 8)
        tag("data"); u32(big ? 0xFFFF_FFFF : dataBytes)
        return h
    }
}
