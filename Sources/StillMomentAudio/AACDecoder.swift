// AACDecoder.swift — AAC in MP4/M4A: the demuxer's access units decoded by libfaad2, trimmed.
import CFaad

extension AudioFile: MP4ByteReader {}

/// An `AudioFile` as the demuxer's byte source. A read error keeps only AudioError's reason,
/// so that the error the user sees names the path once.
struct MP4FileReader: MP4ByteReader {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let file: AudioFile
    var size: UInt64 { file.size }

    func read(at offset: UInt64, count: Int) throws -> [UInt8] {
        do {
            return try file.read(at: offset, count: count)
        } catch .unreadable(_, let reason) {
            throw Failure(description: reason)
        } catch {
            throw Failure(description: error.description)
        }
    }
}

extension AudioError {
    init(_ error: MP4Error, path: String) {
        switch error {
        case .notMP4: self = .notAudio(path: path)
        case .truncated(let what): self = .truncated(path: path, detail: what)
        case .corrupt(let what): self = .corrupt(path: path, detail: what)
        case .noAudioTrack: self = .noAudio(path: path)
        case .unsupportedCodec(let codec): self = .unsupportedCodec(path: path, codec: codec)
        case .unreadable(let reason): self = .unreadable(path: path, reason: reason)
        }
    }
}

/// AAC (LC, HE-AAC, HE-AACv2) in MP4/M4A: our ISO-BMFF demuxer plus libfaad2.
///
/// Trimming: encoder priming and padding come from the edit list (`elst`), else from
/// the iTunes `iTunSMPB` tag. With neither, nothing is trimmed (every decoded frame is
/// kept, as FFmpeg does). A trim that skips more than the track holds is refused; one that
/// keeps more than it holds ends with the track. All frame arithmetic on the file's values
/// is checked (128-bit products), so no header can make it trap.
public final class AACDecoder: AudioDecoder {
    public let format: AudioFormat
    public let totalFrames: Int64?
    public let tags: MP4Tags
    public let track: MP4AudioTrack
    private let file: AudioFile
    private var handle: NeAACDecHandle?
    /// Output frames per frame at the track's announced rate (2 for implicit SBR).
    private let rateFactor: Int64
    private let outputRate: Int64
    private let sourceChannels: Int       // channels faad delivers
    /// Trim, in untrimmed output frames.
    private let trimStart: Int64
    private let trimEnd: Int64
    private var nextSample = 0
    /// The last access unit decoded, interleaved in `format`'s channels: its own memory (not
    /// an array), since `borrow` hands out a view of it that outlives any one call.
    private var pending = UnsafeMutableBufferPointer<Float>(start: nil, count: 0)
    private var pendingFrame: Int64 = 0   // untrimmed index of pending's first frame
    private var pendingCount = 0
    private var position: Int64 = 0       // untrimmed index of the next frame to deliver
    private var packet: [UInt8]

    public init(file: AudioFile) throws(AudioError) {
        self.file = file
        let mp4: MP4File
        do {
            mp4 = try MP4File(reader: MP4FileReader(file: file))
        } catch {
            throw AudioError(error, path: file.path)
        }
        track = mp4.track
        tags = mp4.tags
        guard track.sampleCount > 0 else { throw AudioError.noAudio(path: file.path) }
        packet = [UInt8](repeating: 0, count: Int(max(track.maxSampleSize, 1)))  // ≤ MP4File.maxSampleSize
        let first = try Self.table(file.path) { () throws(MP4Error) in try mp4.track.sample(at: 0) }
        let firstBytes = try file.read(at: first.offset, count: Int(first.size))
        guard firstBytes.count == Int(first.size) else {
            throw AudioError.truncated(path: file.path, detail: "the first AAC frame is cut short")
        }
        let probeHandle = try Self.openHandle(track: track, path: file.path)
        handle = nil

        // Decode the first access unit to learn what faad really produces (implicit
        // SBR doubles the rate; mono may come out as two equal channels).
        var info = NeAACDecFrameInfo()
        var bytes = firstBytes
        let samples = bytes.withUnsafeMutableBufferPointer { buf in
            NeAACDecDecode(probeHandle, &info, buf.baseAddress, UInt(buf.count))
        }
        NeAACDecClose(probeHandle)
        if info.error != 0 || samples == nil || info.samples == 0 || info.channels == 0 {
            let why = info.error != 0 ? String(cString: NeAACDecGetErrorMessage(info.error)) : "no samples"
            throw AudioError.corrupt(path: file.path, detail: "AAC decoding failed: \(why)")
        }
        guard info.samplerate > 0, info.samplerate <= 768_000 else {
            throw AudioError.corrupt(path: file.path, detail: "libfaad2 decodes it at \(info.samplerate) Hz")
        }
        outputRate = Int64(info.samplerate)
        sourceChannels = Int(info.channels)
        let announced = Int64(max(1, track.sampleRate))
        rateFactor = max(1, (outputRate + announced / 2) / announced)
        let stereo = info.ps != 0 || track.objectType == 29 || track.channels >= 2
        format = AudioFormat(sampleRate: Int(outputRate), channels: stereo ? 2 : 1)
        // The demuxer guarantees timescale > 0; the products are 128-bit, so a huge
        // timescale or duration is refused here instead of trapping.
        guard let frames = mp4Scale(track.totalDuration, UInt64(outputRate), UInt64(max(1, track.timescale))),
              let untrimmed = Int64(exactly: frames) else {
            throw AudioError.corrupt(
                path: file.path, detail: "the track's length (\(track.totalDuration) at a timescale of \(track.timescale)) is out of range")
        }
        let (priming, primingOverflow) = max(0, track.priming).multipliedReportingOverflow(by: rateFactor)
        guard !primingOverflow, priming <= untrimmed else {
            let source = track.trimSource == .editList ? "the edit list" : "iTunSMPB"
            throw AudioError.corrupt(
                path: file.path,
                detail: "\(source) says to skip \(track.priming) frames, more than the \(untrimmed / rateFactor) the track holds")
        }
        trimStart = priming
        if let valid = track.validDuration {
            // More than the track holds (a damaged iTunSMPB length) ends with the track.
            let (kept, keptOverflow) = max(0, valid).multipliedReportingOverflow(by: rateFactor)
            let (end, endOverflow) = trimStart.addingReportingOverflow(kept)
            trimEnd = keptOverflow || endOverflow ? untrimmed : min(untrimmed, end)
        } else {
            trimEnd = untrimmed
        }
        totalFrames = max(0, trimEnd - trimStart)
        // faad gives at most 2048 frames of 64 channels; anything more is not trusted for sizing.
        pending = .allocate(capacity: min(Int(clamping: info.samples), 1 << 17) * 2 + 4096)
        try restart(at: 0, position: trimStart)
    }

    deinit {
        if let handle { NeAACDecClose(handle) }
        pending.deallocate()
    }

    /// Runs a sample-table lookup, whose only failure is an I/O error or a file changed
    /// underneath, as an AudioError.
    private static func table<T>(_ path: String, _ body: () throws(MP4Error) -> T) throws(AudioError) -> T {
        do {
            return try body()
        } catch {
            throw AudioError(error, path: path)
        }
    }

    private static func openHandle(track: MP4AudioTrack, path: String) throws(AudioError) -> NeAACDecHandle {
        guard let h = NeAACDecOpen() else { throw AudioError.corrupt(path: path, detail: "libfaad2 could not start") }
        if let config = NeAACDecGetCurrentConfiguration(h) {
            config.pointee.outputFormat = UInt8(FAAD_FMT_FLOAT)
            config.pointee.downMatrix = 1
            _ = NeAACDecSetConfiguration(h, config)
        }
        var asc = track.audioSpecificConfig
        var rate: UInt = 0
        var channels: UInt8 = 0
        let rc = asc.withUnsafeMutableBufferPointer { buf in
            NeAACDecInit2(h, buf.baseAddress, UInt(buf.count), &rate, &channels)
        }
        guard rc >= 0 else {
            NeAACDecClose(h)
            throw AudioError.corrupt(path: path, detail: "libfaad2 refused the AAC configuration")
        }
        // faad swallows the output of the very first frame after init; telling it that
        // we are past frame 0 makes frame 0 decode like any other.
        NeAACDecPostSeekReset(h, 1)
        return h
    }

    /// Restarts decoding at access unit `sample` (after a fresh decoder state) and
    /// delivers from untrimmed frame `position` on.
    private func restart(at sample: Int, position: Int64) throws(AudioError) {
        if let handle { NeAACDecClose(handle) }
        handle = nil
        handle = try Self.openHandle(track: track, path: file.path)
        nextSample = sample
        let track = self.track
        let time = try Self.table(file.path) { () throws(MP4Error) in try track.decodeTime(ofSample: sample) }
        pendingFrame = outputFrames(time)
        pendingCount = 0
        self.position = position
    }

    /// Media time (≤ the track's duration) in output frames: ≤ the untrimmed length, which
    /// was checked to fit.
    private func outputFrames(_ mediaTime: UInt64) -> Int64 {
        mp4Scale(mediaTime, UInt64(outputRate), UInt64(max(1, track.timescale))).flatMap { Int64(exactly: $0) } ?? Int64.max
    }

    /// Decodes the next access unit into `pending`. False at the end.
    private func decodeNext() throws(AudioError) -> Bool {
        guard nextSample < track.sampleCount else { return false }
        let (track, index) = (self.track, nextSample)
        let (offset, size) = try Self.table(file.path) { () throws(MP4Error) in try track.sample(at: index) }
        let n = Int(size)
        if packet.count < n { packet = [UInt8](repeating: 0, count: n) }
        let got = try packet.withStorage { (buf) throws(AudioError) -> Int in
            try file.read(at: offset, into: UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buf)[0..<n]))
        }
        guard got == n else {
            throw AudioError.truncated(path: file.path, detail: "AAC frame \(nextSample) is cut short")
        }
        var info = NeAACDecFrameInfo()
        let out = packet.withUnsafeMutableBufferPointer { buf in
            NeAACDecDecode(handle, &info, buf.baseAddress, UInt(n))
        }
        if info.error != 0 {
            let why = String(cString: NeAACDecGetErrorMessage(info.error))
            throw AudioError.corrupt(path: file.path, detail: "AAC frame \(nextSample): \(why)")
        }
        nextSample += 1
        let channels = max(1, Int(info.channels))
        let frames = min(Int(clamping: info.samples), 1 << 20) / channels
        if pendingCount > 0 { pendingFrame += Int64(pendingCount) }
        pendingCount = 0
        guard let out, frames > 0 else { return true }
        let src = out.assumingMemoryBound(to: Float.self)
        let want = format.channels
        if pending.count < frames * want {
            pending.deallocate()
            pending = .allocate(capacity: frames * want)
        }
        let dst = pending
        if channels == want {
            dst.baseAddress?.update(from: src, count: frames * want)
        } else if want == 1 {
            for i in 0..<frames { dst[i] = src[i * channels] }
        } else {
            for i in 0..<frames {
                dst[2 * i] = src[i * channels]
                dst[2 * i + 1] = channels > 1 ? src[i * channels + 1] : src[i * channels]
            }
        }
        pendingCount = frames
        return true
    }

    /// Up to `frames` frames of the access unit decoded last, where they are: valid until
    /// the next call on this decoder. Empty only at the end.
    public func borrow(frames: Int) throws(AudioError) -> UnsafeBufferPointer<Float> {
        let ch = format.channels
        while position < trimEnd {
            let pendingEnd = pendingFrame + Int64(pendingCount)
            if position >= pendingEnd {
                if pendingCount > 0 {
                    pendingFrame = pendingEnd
                    pendingCount = 0
                }
                if try !decodeNext() { break }
                continue
            }
            if position < pendingFrame {
                // A gap (cannot happen with a consistent stts); skip forward.
                position = pendingFrame
                continue
            }
            let from = Int(position - pendingFrame)
            let n = min(pendingCount - from, frames, Int(trimEnd - position))
            position += Int64(n)
            return UnsafeBufferPointer(rebasing: pending[(from * ch)..<((from + n) * ch)])
        }
        return UnsafeBufferPointer(start: nil, count: 0)
    }

    public func seek(toFrame frame: Int64) throws(AudioError) {
        let target = trimStart + max(0, min(frame, trimEnd - trimStart))
        let track = self.track
        let mediaTime = mp4Scale(UInt64(max(0, target)), UInt64(max(1, track.timescale)), UInt64(max(1, outputRate)))
            ?? track.totalDuration
        let found = try Self.table(file.path) { () throws(MP4Error) in try track.sampleIndex(atTime: mediaTime) }
        let sample = min(found, track.sampleCount)
        // One access unit of pre-roll: the MDCT overlap needs the previous frame.
        try restart(at: max(0, sample - 1), position: target)
    }
}
