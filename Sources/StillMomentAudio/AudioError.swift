/// Every error the audio layer can raise. Each one reads as one line that says what
/// happened and, where the user can do something, what to do.
public enum AudioError: Error, Equatable, Sendable, CustomStringConvertible {
    case fileNotFound(path: String)
    case notARegularFile(path: String, kind: String)
    case unreadable(path: String, reason: String)
    case empty(path: String)
    case notAudio(path: String)
    case unsupportedCodec(path: String, codec: String)
    case truncated(path: String, detail: String)
    case corrupt(path: String, detail: String)
    case noAudio(path: String)
    case device(DeviceError)
    case output(path: String, reason: String)
    case invalidArgument(String)

    public var description: String {
        switch self {
        case .fileNotFound(let path):
            return "\(path): no such file"
        case .notARegularFile(let path, let kind):
            return "\(path): is a \(kind), not an audio file"
        case .unreadable(let path, let reason):
            return "\(path): cannot read it (\(reason))"
        case .empty(let path):
            return "\(path): the file is empty"
        case .notAudio(let path):
            return "\(path): not an audio file this player knows (it plays MP3 and M4A/AAC)"
        case .unsupportedCodec(let path, let codec):
            return "\(path): the audio is \(codec), which is not supported (convert it to MP3 or AAC)"
        case .truncated(let path, let detail):
            return "\(path): the file is cut short (\(detail)); copy it again from its source"
        case .corrupt(let path, let detail):
            return "\(path): the file is damaged (\(detail))"
        case .noAudio(let path):
            return "\(path): no decodable audio in the file"
        case .device(let error):
            return error.description
        case .output(let path, let reason):
            return "\(path): cannot write the output (\(reason))"
        case .invalidArgument(let message):
            return message
        }
    }
}

/// An error from the sound device, carrying ALSA's own message.
public struct DeviceError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case noDevice, busy, configuration, format, thread, memory, lost
    }
    public let kind: Kind
    public let device: String
    /// What ALSA said, e.g. "cannot open ALSA device 'foo': No such file or directory (Unknown PCM foo)".
    public let message: String
    /// ALSA's negative error number, 0 when none.
    public let alsaError: Int32
    /// The device is a PulseAudio stream (a sound server), not an ALSA PCM.
    public let soundServer: Bool

    public init(kind: Kind, device: String, message: String, alsaError: Int32, soundServer: Bool = false) {
        self.kind = kind
        self.device = device
        self.message = message
        self.alsaError = alsaError
        self.soundServer = soundServer
    }

    public var hint: String {
        switch kind {
        case .noDevice where soundServer:
            return "is the sound server running (`pactl info`)? Or choose an ALSA device with --device NAME (`aplay -L`)"
        case .noDevice, .configuration, .format:
            return "choose another device with --device NAME (list them with `aplay -L`)"
        case .busy:
            return "another program is using it; stop that program or choose another with --device NAME (`aplay -L`)"
        case .lost where soundServer:
            return "is the sound server still running (`pactl info`)? Start it, then start the session again"
        case .lost:
            return "check the cable or the sound server, then start again (devices: `aplay -L`)"
        case .thread, .memory:
            return "the system is short of resources; try again"
        }
    }

    public var description: String { "\(message); \(hint)" }
}
