/// The sample rate and channel count a decoder produces.
public struct AudioFormat: Equatable, Sendable, CustomStringConvertible {
    public let sampleRate: Int
    public let channels: Int
    public init(sampleRate: Int, channels: Int) {
        self.sampleRate = sampleRate
        self.channels = channels
    }
    public var description: String { "\(sampleRate) Hz, \(channels == 1 ? "mono" : "\(channels) channels")" }
}

/// A streaming decoder: constant memory whatever the file's length.
///
/// Frames are interleaved float samples in [-1, 1] at `format`. Encoder priming and
/// padding are already removed, so frame 0 is the first frame of the real audio and
/// `totalFrames` (when known) is the exact length.
public protocol AudioDecoder: AnyObject {
    var format: AudioFormat { get }
    /// The exact length in frames after trimming; nil when the container does not say.
    var totalFrames: Int64? { get }
    /// Up to `frames` frames where the decoder already holds them, without a copy: valid
    /// until the next call on the decoder. Empty only at the end.
    func borrow(frames: Int) throws(AudioError) -> UnsafeBufferPointer<Float>
    /// Moves to `frame` (clamped to the end).
    func seek(toFrame frame: Int64) throws(AudioError)
}

extension AudioDecoder {
    /// Reads up to `frames` frames (borrowed, copied); returns 0 only at the end.
    public func read(into buffer: UnsafeMutablePointer<Float>, frames: Int) throws(AudioError) -> Int {
        let channels = format.channels
        var got = 0
        while got < frames {
            let part = try borrow(frames: frames - got)
            guard let base = part.baseAddress, !part.isEmpty else { break }
            (buffer + got * channels).update(from: base, count: part.count)
            got += part.count / channels
        }
        return got
    }
}

/// Which container/codec a file holds, judged by its content, never by its name.
public enum AudioContainer: Equatable, Sendable {
    case mpeg(MPEGProbe)
    case mp4

    public static func == (lhs: AudioContainer, rhs: AudioContainer) -> Bool {
        switch (lhs, rhs) {
        case (.mpeg, .mpeg), (.mp4, .mp4): return true
        default: return false
        }
    }

    /// Looks at the content of `file`.
    public static func detect(_ file: AudioFile) throws(AudioError) -> AudioContainer {
        if file.size == 0 { throw AudioError.empty(path: file.path) }
        let head = try file.read(at: 0, count: 12)
        if head.count >= 8 {
            let type = String(decoding: head[4..<8], as: UTF8.self)
            if ["ftyp", "moov", "mdat", "free", "skip", "wide"].contains(type) { return .mp4 }
        }
        if let probe = try MPEGProbe.probe(file) { return .mpeg(probe) }
        throw AudioError.notAudio(path: file.path)
    }
}

/// Opens the right decoder for a file's content. `knownFrames`: its length, counted when
/// it was imported (an MP3 without a Xing tag is then not scanned for it); `knownIndex`:
/// an MP3's frame index, taken then (a far seek does not read its way there).
public func openDecoder(path: String, knownFrames: Int64? = nil, knownIndex: SeekIndex? = nil) throws(AudioError) -> any AudioDecoder {
    let file = try AudioFile(path: path)
    switch try AudioContainer.detect(file) {
    case .mpeg(let probe): return try MP3Decoder(file: file, probe: probe, knownFrames: knownFrames, knownIndex: knownIndex)
    case .mp4: return try AACDecoder(file: file)
    }
}
