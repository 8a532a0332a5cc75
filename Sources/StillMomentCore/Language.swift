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

/// A text in both languages (a sound's name and description).
public struct LocalizedText: Codable, Sendable, Equatable {
    public var en: String
    public var de: String
    public init(en: String, de: String) {
        self.en = en
        self.de = de
    }
    public func text(_ language: Language = .current) -> String { language == .de ? de : en }
}
