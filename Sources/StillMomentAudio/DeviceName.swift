// The one guard for sound-device names: every name that reaches ALSA or PulseAudio is a
// `DeviceName`, made only by `DeviceName(parsing:)`, which accepts the forms a user plays
// on and nothing else. ALSA reads a PCM name as configuration: `file:FILE="|cmd"` runs a
// command, `file:`/`tee:` write any file the process can, `{ type … }` defines a PCM
// inline. A list of forbidden forms would miss one, so this accepts known forms only:
//
//   default, null                       (and default:CARD=X, default:X)
//   pulse, pulse:SINK                   a PulseAudio sink name ([A-Za-z0-9_.-], as PulseAudio's own rule)
//   hw, plughw, sysdefault, dmix, dsnoop
//       :N[,D[,S]] or :CARD=X[,DEV=N][,SUBDEV=N]   (X a card number or id)
//   NAME[:CARD=X[,DEV=N][,SUBDEV=N]]    a PCM the system's or the user's ALSA configuration
//                                       defines (front, hdmi, iec958, a ~/.asoundrc name, …);
//                                       ALSA itself refuses a name it does not define
//   alsa:NAME                           any of the ALSA forms above, forced to ALSA
//   snapcast, snapcast:/PATH            snapserver's pipe source (/tmp/snapfifo, or PATH:
//                                       absolute, [A-Za-z0-9_.-/], no "." or ".." part; the
//                                       backend opens only a named pipe, never a link)
//
// `file`, `tee` and `shm` are refused by name, and no other KEY= than CARD, DEV and
// SUBDEV, no quotes, braces, `|`, `$`, `/`, spaces or dots get through. The tests' own
// capture device (`file:FILE=/absolute/path,FORMAT=wav|raw`) is accepted only when the
// process was started with STILLMOMENT_TEST_DEVICES=file in its environment, and tests in
// process name any device through the `Testing` SPI: no request, file or peer reaches either.
import Glibc

public struct DeviceName: Sendable, Hashable, CustomStringConvertible {
    /// The name as given (trimmed), which is what the backend is handed.
    public let text: String

    /// What a name is, for the error messages and the tests.
    public enum Form: Sendable, Hashable {
        case pulse(sink: String?)
        case card(String)           // hw, plughw, sysdefault, dmix, dsnoop, default (with or without a card)
        case configured(String)     // a PCM defined by ALSA's configuration
        case null
        case testFile
        /// snapserver's pipe (nil: its default path).
        case snapcast(pipe: String?)
    }

    public let form: Form
    /// `alsa:` given: ALSA even where the name leads to its PulseAudio plugin.
    public let forcedALSA: Bool

    public var description: String { text }

    public static let `default` = DeviceName(trusted: "default", form: .card("default"))
    public static let null = DeviceName(trusted: "null", form: .null)

    private init(trusted text: String, form: Form, forcedALSA: Bool = false) {
        self.text = text
        self.form = form
        self.forcedALSA = forcedALSA
    }

    /// Whether this process accepts the tests' `file:` capture device: started with
    /// STILLMOMENT_TEST_DEVICES=file (read once, at the first name parsed).
    public static let testFilesAllowed: Bool = {
        guard let v = getenv("STILLMOMENT_TEST_DEVICES") else { return false }
        return String(cString: v) == "file"
    }()

    /// The longest name taken (bytes).
    public static let maxLength = 256

    /// Parses a device name; throws what is wrong with it.
    public init(parsing raw: String) throws(DeviceNameError) {
        try self.init(parsing: raw, allowingTestFiles: Self.testFilesAllowed)
    }

    /// A name taken as it is, for the tests in process (any ALSA name, `plug:…` and
    /// `file:` captures included); only a target that imports the `Testing` SPI sees it.
    @_spi(Testing) public init(testing text: String) {
        self.init(trusted: text, form: .testFile)
    }

    init(parsing raw: String, allowingTestFiles: Bool) throws(DeviceNameError) {
        let text = Self.trimmed(raw)
        guard !text.isEmpty else { throw .empty }
        guard text.utf8.count <= Self.maxLength else { throw .tooLong }
        if text.contains(where: { "{}|\"'".contains($0) }) { throw .inlineDefinition(Self.shown(text)) }
        guard text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw .notPrintable(Self.shown(text))
        }
        if text.hasPrefix("alsa:") {
            let rest = String(text.dropFirst(5))
            guard !rest.isEmpty else { throw .unknownForm(Self.shown(text)) }
            let inner = try Self.alsaForm(rest, whole: text, allowingTestFiles: allowingTestFiles)
            self.init(trusted: text, form: inner, forcedALSA: true)
            return
        }
        if text == "pulse" {
            self.init(trusted: text, form: .pulse(sink: nil))
            return
        }
        if text == "snapcast" {
            self.init(trusted: text, form: .snapcast(pipe: nil))
            return
        }
        if text.hasPrefix("snapcast:") {
            let path = String(text.dropFirst(9))
            guard Self.isPipePath(path) else { throw .badPipe(Self.shown(text)) }
            self.init(trusted: text, form: .snapcast(pipe: path))
            return
        }
        if text.hasPrefix("pulse:") {
            let sink = String(text.dropFirst(6))
            guard (1...128).contains(sink.utf8.count), sink.utf8.allSatisfy(Self.isSinkByte) else {
                throw .badSink(Self.shown(text))
            }
            self.init(trusted: text, form: .pulse(sink: sink))
            return
        }
        self.init(trusted: text, form: try Self.alsaForm(text, whole: text, allowingTestFiles: allowingTestFiles))
    }

    /// A pipe's path: absolute, at most 200 bytes of letters, digits, '_', '.', '-' and '/',
    /// no empty, "." or ".." part.
    static func isPipePath(_ path: String) -> Bool {
        guard path.hasPrefix("/"), (2...200).contains(path.utf8.count),
              path.utf8.allSatisfy({ isSinkByte($0) || $0 == UInt8(ascii: "/") }) else { return false }
        let parts = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        return parts.allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." }
    }

    // MARK: the ALSA forms

    /// PCMs with card arguments that may be given by position (`hw:1,0`) too.
    static let cardPCMs: Set<String> = ["hw", "plughw", "sysdefault", "dmix", "dsnoop", "default"]
    /// Defined by ALSA's own configuration, but they write files or talk to another process.
    static let refusedPCMs: Set<String> = ["file", "tee", "shm"]
    static let cardKeys = ["CARD", "DEV", "SUBDEV"]

    private static func alsaForm(_ text: String, whole: String, allowingTestFiles: Bool) throws(DeviceNameError) -> Form {
        let base: Substring, args: Substring?
        if let colon = text.firstIndex(of: ":") {
            base = text[..<colon]
            args = text[text.index(after: colon)...]
        } else {
            base = Substring(text)
            args = nil
        }
        if base == "file", allowingTestFiles, let args, isTestFile(args) { return .testFile }
        // Whatever is not a plain name with card arguments is an inline definition.
        if text.contains(where: { "{}|\"'$/\\;=".contains($0) }) && !(args.map(isKeyedCardList) ?? false) {
            throw .inlineDefinition(shown(whole))
        }
        guard (1...64).contains(base.utf8.count), base.utf8.allSatisfy(isNameByte) else { throw .unknownForm(shown(whole)) }
        if refusedPCMs.contains(String(base)) { throw .writesFiles(shown(whole)) }
        if base == "null" {
            guard args == nil else { throw .unknownForm(shown(whole)) }
            return .null
        }
        if let args {
            guard !args.isEmpty else { throw .unknownForm(shown(whole)) }
            if isKeyedCardList(args) {
                return cardPCMs.contains(String(base)) ? .card(text) : .configured(text)
            }
            guard cardPCMs.contains(String(base)), isPositionalCardList(args) else {
                throw args.contains("=") ? .inlineDefinition(shown(whole)) : .unknownForm(shown(whole))
            }
            return .card(text)
        }
        return cardPCMs.contains(String(base)) ? .card(text) : .configured(text)
    }

    /// `CARD=X[,DEV=N][,SUBDEV=N]`, each key at most once.
    private static func isKeyedCardList(_ args: Substring) -> Bool {
        var seen = Set<String>()
        for item in args.split(separator: ",", omittingEmptySubsequences: false) {
            let kv = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard kv.count == 2 else { return false }
            let key = String(kv[0]), value = kv[1]
            guard cardKeys.contains(key), seen.insert(key).inserted else { return false }
            guard key == "CARD" ? isCard(value) : isNumber(value) else { return false }
        }
        return seen.contains("CARD") || seen.contains("DEV")
    }

    /// `X[,N[,N]]`: a card, then a device and a subdevice.
    private static func isPositionalCardList(_ args: Substring) -> Bool {
        let items = args.split(separator: ",", omittingEmptySubsequences: false)
        guard (1...3).contains(items.count), isCard(items[0]) else { return false }
        return items.dropFirst().allSatisfy(isNumber)
    }

    /// A card's number (0–31) or its id (letters, digits, `_`, `-`; at most 32).
    private static func isCard(_ s: Substring) -> Bool {
        if isNumber(s) { return true }
        return (1...32).contains(s.utf8.count) && s.utf8.allSatisfy(isNameByte) && s.utf8.first.map(isLetter) == true
    }

    private static func isNumber(_ s: Substring) -> Bool {
        (1...3).contains(s.utf8.count) && s.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    /// The tests' capture device: `FILE=/absolute/path,FORMAT=wav|raw`, the path free of
    /// anything ALSA's parser or the file plugin reads (`|` first, quotes, commas, braces).
    private static func isTestFile(_ args: Substring) -> Bool {
        var file: Substring?, format: Substring?
        for item in args.split(separator: ",", omittingEmptySubsequences: false) {
            if item.hasPrefix("FILE="), file == nil { file = item.dropFirst(5) } else if item.hasPrefix("FORMAT="), format == nil {
                format = item.dropFirst(7)
            } else { return false }
        }
        guard let file, file.hasPrefix("/"), file.count > 1,
              !file.contains(where: { "{}|\"'$\\;=".contains($0) }) else { return false }
        return format == nil || format == "wav" || format == "raw"
    }

    private static func isLetter(_ b: UInt8) -> Bool { (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) }
    private static func isNameByte(_ b: UInt8) -> Bool {
        isLetter(b) || (b >= 0x30 && b <= 0x39) || b == 0x5F || b == 0x2D
    }
    /// PulseAudio's own rule for names (pa_namereg_is_valid_name): letters, digits, `_`, `.`, `-`.
    private static func isSinkByte(_ b: UInt8) -> Bool { isNameByte(b) || b == 0x2E }

    private static func trimmed(_ s: String) -> String {
        var scalars = Substring(s).unicodeScalars[...]
        while let f = scalars.first, f == " " || f == "\t" { scalars.removeFirst() }
        while let l = scalars.last, l == " " || l == "\t" || l == "\n" || l == "\r" { scalars.removeLast() }
        return String(String.UnicodeScalarView(scalars))
    }

    /// The name as an error shows it: its printable ASCII only (no control or bidi
    /// characters reach a terminal), at most 80 characters.
    static func shown(_ s: String) -> String {
        let cleaned = String(String.UnicodeScalarView(s.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }))
        return cleaned.count > 80 ? String(cleaned.prefix(79)) + "…" : cleaned
    }
}

/// Why a device name is refused. The core renders it in the user's language
/// (`DeviceNameError.text`); `description` is the English line.
public enum DeviceNameError: Error, Sendable, Equatable, CustomStringConvertible {
    case empty
    case tooLong
    case notPrintable(String)
    case inlineDefinition(String)
    case writesFiles(String)
    case badSink(String)
    case badPipe(String)
    case unknownForm(String)

    /// A stable code for the wire and the tests.
    public var code: String {
        switch self {
        case .empty: return "device-empty"
        case .tooLong: return "device-too-long"
        case .notPrintable: return "device-not-printable"
        case .inlineDefinition: return "device-inline-definition"
        case .writesFiles: return "device-writes-files"
        case .badSink: return "device-bad-sink"
        case .badPipe: return "device-bad-pipe"
        case .unknownForm: return "device-unknown-form"
        }
    }

    public var description: String {
        let forms = "choose default, pulse, pulse:SINK, hw:1,0, plughw:CARD=NAME,DEV=0 or a PCM your ALSA configuration defines (`aplay -L`)"
        switch self {
        case .empty: return "the device name is empty; " + forms
        case .tooLong: return "the device name is longer than \(DeviceName.maxLength) characters; " + forms
        case .notPrintable(let s): return "'\(s)' is not a device name (spaces, control or non-ASCII characters); " + forms
        case .inlineDefinition(let s):
            return "'\(s)' is an inline ALSA definition (KEY=…, {…}, |, quotes), which is refused; " + forms
        case .writesFiles(let s): return "'\(s)' writes audio to a file or another program, which is refused; " + forms
        case .badSink(let s): return "'\(s)': a PulseAudio sink name is 1 to 128 letters, digits, '_', '.' or '-' (`pactl list short sinks`)"
        case .badPipe(let s): return "'\(s)': snapserver's pipe is an absolute path of letters, digits, '_', '.', '-' and '/' (no '..'), at most 200 characters"
        case .unknownForm(let s): return "'\(s)' is not a device name stillmoment plays on; " + forms
        }
    }
}

/// On the wire, in settings and in stored presets a device name is its text; decoding
/// parses it, so a stored or sent name is checked like a typed one.
extension DeviceName: Codable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do { try self.init(parsing: text) } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(text)
    }
}
