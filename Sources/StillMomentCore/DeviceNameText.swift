// The device-name guard (StillMomentAudio's DeviceName) as the core's front-ends meet it:
// a refused name is a bad value of the option or setting it came in, in the user's language.
import StillMomentAudio

extension DeviceName {
    /// Parses a device name from the local user (an option, a setting, a preset); a refused
    /// name is `badValue` of `option`.
    public static func parse(_ text: String, option: String) throws(CoreError) -> DeviceName {
        do { return try DeviceName(parsing: text) } catch {
            throw CoreError.badValue(option: option, reason: LocalizedText(en: error.text(.en), de: error.text(.de)))
        }
    }

    /// The `device` setting in force; a damaged stored value says so (exit 2, naming the setting).
    public static func setting(_ settings: Settings) throws(CoreError) -> DeviceName {
        try parse(settings.value("device"), option: "device")
    }
}

extension DeviceNameError {
    /// The error in the user's language.
    public func text(_ language: Language = .current) -> String {
        guard language == .de else { return description }
        let forms = "wähle default, pulse, pulse:SENKE, hw:1,0, plughw:CARD=NAME,DEV=0 oder ein PCM aus deiner ALSA-Konfiguration (`aplay -L`)"
        switch self {
        case .empty: return "der Gerätename ist leer; " + forms
        case .tooLong: return "der Gerätename ist länger als \(DeviceName.maxLength) Zeichen; " + forms
        case .notPrintable(let s): return "'\(s)' ist kein Gerätename (Leerzeichen, Steuer- oder Nicht-ASCII-Zeichen); " + forms
        case .inlineDefinition(let s):
            return "'\(s)' ist eine ALSA-Definition im Namen (SCHLÜSSEL=…, {…}, |, Anführungszeichen), die abgelehnt wird; " + forms
        case .writesFiles(let s): return "'\(s)' schreibt den Ton in eine Datei oder ein anderes Programm, das wird abgelehnt; " + forms
        case .badSink(let s): return "'\(s)': ein PulseAudio-Senkenname hat 1 bis 128 Buchstaben, Ziffern, '_', '.' oder '-' (`pactl list short sinks`)"
        case .badPipe(let s): return "'\(s)': die Pipe von snapserver ist ein absoluter Pfad aus Buchstaben, Ziffern, '_', '.', '-' und '/' (kein '..'), höchstens 200 Zeichen"
        case .unknownForm(let s): return "'\(s)' ist kein Gerätename, auf dem stillmoment spielt; " + forms
        }
    }
}
