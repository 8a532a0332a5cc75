// The audio layer's errors in the user's language (the file errors and the device hints as the
// CLI and the import show them).
import StillMomentAudio

extension AudioError {
    /// The error in the user's language. Paths, the system's reason and a decoder's
    /// technical detail are kept as they are; our words around them are translated.
    public func text(_ language: Language = .current) -> String {
        guard language == .de else { return description }
        switch self {
        case .fileNotFound(let path):
            return "\(path): Datei nicht gefunden"
        case .notARegularFile(let path, let kind):
            let names = ["dangling symbolic link": "ein symbolischer Link ins Leere", "folder": "ein Ordner",
                         "FIFO (named pipe)": "eine FIFO (benannte Pipe)", "socket": "ein Socket",
                         "device": "ein Gerät", "special file": "eine Spezialdatei"]
            return "\(path): ist \(names[kind] ?? kind), keine Audiodatei"
        case .unreadable(let path, let reason):
            return "\(path): kann nicht gelesen werden (\(reason))"
        case .empty(let path):
            return "\(path): die Datei ist leer"
        case .notAudio(let path):
            return "\(path): keine Audiodatei, die dieser Player kennt (er spielt MP3 und M4A/AAC)"
        case .unsupportedCodec(let path, let codec):
            return "\(path): der Ton ist \(codec), das wird nicht unterstützt (wandle ihn in MP3 oder AAC um)"
        case .truncated(let path, let detail):
            return "\(path): die Datei ist abgeschnitten (\(detail)); kopiere sie noch einmal von ihrer Quelle"
        case .corrupt(let path, let detail):
            return "\(path): die Datei ist beschädigt (\(detail))"
        case .noAudio(let path):
            return "\(path): kein abspielbarer Ton in der Datei"
        case .device(let error):
            return error.text(language)
        case .output(let path, let reason):
            return "\(path): die Ausgabe kann nicht geschrieben werden (\(reason))"
        case .invalidArgument(let message):
            return message
        @unknown default:
            return description
        }
    }
}

extension AudioError {
    /// The error in both languages.
    public var words: LocalizedText { LocalizedText(en: text(.en), de: text(.de)) }
}

extension DeviceError {
    /// What to do, in the user's language.
    public func hint(_ language: Language) -> String {
        guard language == .de else { return hint }
        switch kind {
        case .noDevice where soundServer:
            return "läuft der Soundserver (`pactl info`)? Oder wähle ein ALSA-Gerät mit --device NAME (`aplay -L`)"
        case .noDevice, .configuration, .format:
            return "wähle ein anderes Gerät mit --device NAME (Liste: `aplay -L`)"
        case .busy:
            return "ein anderes Programm benutzt es; beende dieses Programm oder wähle ein anderes Gerät mit --device NAME (`aplay -L`)"
        case .lost where soundServer:
            return "läuft der Soundserver noch (`pactl info`)? Starte ihn, dann starte die Sitzung neu"
        case .lost:
            return "prüfe das Kabel oder den Soundserver, dann starte neu (Geräte: `aplay -L`)"
        case .thread, .memory:
            return "dem System fehlen gerade Ressourcen; versuche es noch einmal"
        @unknown default:
            return hint
        }
    }

    /// ALSA's (or the sound server's) own message, and what to do in the user's language.
    public func text(_ language: Language = .current) -> String { "\(message); \(hint(language))" }
}
