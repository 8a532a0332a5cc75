import FoundationEssentials
import Glibc

/// User-facing language: German when LC_ALL, LC_MESSAGES or LANG says so, else English.
public enum Language: String, Sendable {
    case en, de

    public static var current: Language {
        // A thread that serves another user's request speaks that user's language.
        switch UInt(bitPattern: pthread_getspecific(languageKey)) {
        case 1: return .en
        case 2: return .de
        default: break
        }
        for key in ["LC_ALL", "LC_MESSAGES", "LANG"] {
            if let v = Environment.value(key) { return v.lowercased().hasPrefix("de") ? .de : .en }
        }
        return .en
    }
}

/// The calling thread's language while it serves someone else (the daemon answering a
/// client in the client's language).
private let languageKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key, nil)
    return key
}()

extension Language {
    /// Runs `body` with `language` as this thread's language (nil: the environment's).
    public static func speaking<T, E: Error>(_ language: Language?, _ body: () throws(E) -> T) throws(E) -> T {
        let before = pthread_getspecific(languageKey)
        pthread_setspecific(languageKey, language.map { UnsafeRawPointer(bitPattern: $0 == .en ? 1 : 2) } ?? nil)
        defer { pthread_setspecific(languageKey, before) }
        return try body()
    }
}

/// A message in the user's language: `tr("stopped at \(t)", "abgebrochen bei \(t)")`.
/// Both texts are one line and carry the same placeholders.
public func tr(_ en: String, _ de: String, _ language: Language = .current) -> String {
    language == .de ? de : en
}

/// A text in both languages: a sound's name, and every message an error carries, worded
/// where it arises and put into one language only at the edge (the CLI for its user, the
/// daemon for the client that asked, the web app for the browser): `both("…", "…")`.
public struct LocalizedText: Sendable, Equatable, Hashable {
    public var en: String
    public var de: String
    public init(en: String, de: String) {
        self.en = en
        self.de = de
    }

    /// The same text in both (a path, the system's own message, a name).
    public static func same(_ text: String) -> LocalizedText { LocalizedText(en: text, de: text) }

    public func text(_ language: Language = .current) -> String { language == .de ? de : en }

    /// Each language's texts joined.
    public static func + (a: LocalizedText, b: LocalizedText) -> LocalizedText { LocalizedText(en: a.en + b.en, de: a.de + b.de) }
    public static func + (a: LocalizedText, b: String) -> LocalizedText { LocalizedText(en: a.en + b, de: a.de + b) }
    public static func + (a: String, b: LocalizedText) -> LocalizedText { LocalizedText(en: a + b.en, de: a + b.de) }

    /// Both texts changed alike (`Display.clean`).
    public func map(_ f: (String) -> String) -> LocalizedText { LocalizedText(en: f(en), de: f(de)) }
}

extension LocalizedText {
    /// The system's message for the last failed call (`strerror(errno)`), the same in both.
    public static var systemError: LocalizedText { .same(String(cString: strerror(errno))) }

    /// A text that its maker words in the current language (an error's description),
    /// made in each language.
    public static func rendering(_ make: () -> String) -> LocalizedText {
        LocalizedText(en: Language.speaking(.en) { make() }, de: Language.speaking(.de) { make() })
    }
}

/// A message in both languages, put into one only where it is shown.
public func both(_ en: String, _ de: String) -> LocalizedText { LocalizedText(en: en, de: de) }

extension CodingUserInfoKey {
    /// The language to write `LocalizedText` in (a client's answer); absent: both.
    public static let language: CodingUserInfoKey = {
        guard let key = CodingUserInfoKey(rawValue: "stillmoment.language") else { preconditionFailure("a valid key") }
        return key
    }()
}

extension LocalizedText: Codable {
    private enum Keys: String, CodingKey { case en, de }

    /// `{"en": …, "de": …}`, or one text that stands for both (what a client of the
    /// protocol is sent, in its language).
    public init(from decoder: any Decoder) throws {
        if let one = try? decoder.singleValueContainer().decode(String.self) {
            self = .same(one)
            return
        }
        let c = try decoder.container(keyedBy: Keys.self)
        self.init(en: try c.decode(String.self, forKey: .en), de: try c.decode(String.self, forKey: .de))
    }

    /// In the encoder's language (`userInfo[.language]`) as one text, else both.
    public func encode(to encoder: any Encoder) throws {
        if let language = encoder.userInfo[.language] as? Language {
            var c = encoder.singleValueContainer()
            try c.encode(text(language))
            return
        }
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(en, forKey: .en)
        try c.encode(de, forKey: .de)
    }
}
