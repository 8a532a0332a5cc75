import FoundationEssentials

/// User-facing language: German when LC_ALL, LC_MESSAGES or LANG says so, else English.
public enum Language: String, Sendable {
    case en, de

    public static var current: Language {
        let env = ProcessInfo.processInfo.environment
        for key in ["LC_ALL", "LC_MESSAGES", "LANG"] {
            if let v = env[key], !v.isEmpty { return v.lowercased().hasPrefix("de") ? .de : .en }
        }
        return .en
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
