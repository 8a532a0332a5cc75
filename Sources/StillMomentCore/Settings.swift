import FoundationEssentials
import Glibc

/// The timer's defaults, kept in `settings.json` under keys named like the options.
/// Values are stored as text, exactly as they would be typed after the option, and
/// checked with the same parsers.
public struct Settings: Sendable, Equatable {
    /// Core's settings, in the order `settings show` lists them; a front-end's come after
    /// (`register`, SettingsRegistry.swift).
    static let coreDefaults: [(key: String, value: String)] = [
        ("duration", "10m"),
        ("preparation", "10s"),
        ("gong", "temple-bell"),
        ("gong-volume", "1.0"),
        ("strikes", "1"),
        ("interval", "off"),
        ("interval-length", "5m"),
        ("interval-mode", "repeating"),
        ("interval-gong", "soft-interval"),
        ("interval-volume", "0.75"),
        ("ambience", "silent"),
        ("ambience-volume", "0.15"),
        ("device", "default"),
        ("section-gong", "clear-strike"),
        ("section-strikes", "2,1"),
        ("ambience-during", "all"),
        // Whether the daemon keeps the sound device open between sessions (Standby).
        ("output-standby", OutputStandby.keepOpenDuringSchedule.rawValue),
    ]
    /// Every setting and its default: Core's, then the front-ends' registered.
    public static var defaults: [(key: String, value: String)] {
        coreDefaults + registered.map { ($0.key, $0.defaultValue) }
    }
    /// The keys that are not timer options (`output-standby` and every front-end's).
    public static var nonTimerKeys: Set<String> { Set(["output-standby"] + registered.map(\.key)) }
    /// The stored timer options (what a timer starts from).
    public var timerValues: [String: String] {
        let other = Self.nonTimerKeys
        return values.filter { !other.contains($0.key) }
    }

    /// `output-standby` in force (a damaged value counts as the default).
    public var outputStandby: OutputStandby { OutputStandby(rawValue: value("output-standby")) ?? .keepOpenDuringSchedule }
    public static var keys: [String] { defaults.map(\.key) }

    public private(set) var values: [String: String]

    public init(values: [String: String] = [:]) { self.values = values }

    /// The value in force for `key`: the stored one, else the default.
    public func value(_ key: String) -> String {
        values[key] ?? Self.defaults.first { $0.key == key }?.value ?? ""
    }

    public func isDefault(_ key: String) -> Bool { values[key] == nil }

    /// Loads `settings.json` (a missing file means all defaults); a key that is no setting
    /// is an error naming it, unless `droppingUnknown` (what `settings reset` reads, so that
    /// it can mend such a file).
    public static func load(path: String = Paths.settingsFile, droppingUnknown: Bool = false) throws(CoreError) -> Settings {
        guard let data = FileManager.default.contents(atPath: path) else { return Settings() }
        do {
            let raw = try JSON.decode([String: String].self, from: data)
            // A key that is no setting (a typo in a hand edit, a newer version's) is said, not dropped.
            let keys = Self.keys
            if !droppingUnknown, let unknown = raw.keys.sorted().first(where: { !keys.contains($0) }) {
                throw CoreError.damaged(both("\(path): '\(Display.clean(String(unknown.prefix(40))))' is not a setting; fix it, or drop it with `stillmoment settings reset \(Display.clean(String(unknown.prefix(40))))`",
                                           "\(path): '\(Display.clean(String(unknown.prefix(40))))' ist keine Einstellung; berichtige sie oder entferne sie mit `stillmoment settings reset \(Display.clean(String(unknown.prefix(40))))`"))
            }
            return Settings(values: raw.filter { keys.contains($0.key) })
        } catch let error as CoreError {
            throw error
        } catch {
            throw CoreError.damaged(both("\(path): not a valid settings file; fix or remove it (\(error))",
                                       "\(path): keine gültige Einstellungsdatei; berichtige oder entferne sie (\(error))"))
        }
    }

    /// Checks and sets a value (validated against the catalog, so a typo never lands).
    public mutating func set(_ key: String, _ value: String, catalog: SoundCatalog) throws(CoreError) {
        guard Self.keys.contains(key) else { throw Self.unknown(key) }
        if let setting = Self.registered.first(where: { $0.key == key }) {
            try setting.validate(value)
            values[key] = value
            return
        }
        if key == "output-standby" {
            guard OutputStandby(rawValue: value) != nil else {
                let all = OutputStandby.allCases.map(\.rawValue).joined(separator: ", ")
                let shown = Display.clean(String(value.prefix(40)))
                throw CoreError.badValue(option: key, reason: both("'\(shown)' is not one of \(all)", "'\(shown)' ist keiner der Werte \(all)"))
            }
            values[key] = value
            return
        }
        // Checked as the option typed over the other settings (strictly: a sound the settings
        // name that is not here would only fall back to the default).
        var others = self
        others.values[key] = nil
        _ = try TimerConfiguration(settings: others, options: [key: value], catalog: catalog)
        values[key] = value
    }

    public mutating func reset(_ key: String) { values[key] = nil }

    /// The error for a key that is not a setting.
    public static func unknown(_ key: String) -> CoreError {
        let all = keys.joined(separator: ", ")
        return CoreError.badValue(option: "", reason: both("unknown setting '\(key)'; the settings are: \(all)",
                                                         "unbekannte Einstellung '\(key)'; die Einstellungen sind: \(all)"))
    }

    /// Reads, changes and writes `settings.json` under its lock (`settings.json.lock`): the
    /// CLI, the web app and the daemon (Home Assistant's choices) each change what they
    /// change, and none loses another's. Every writer goes through here.
    /// A shared setting changed here is recorded for sync afterwards (`recording`: false
    /// for a peer's, which sync writes).
    public static func update(path: String = Paths.settingsFile, droppingUnknown: Bool = false, recording: Bool = true,
                              _ change: (inout Settings) throws(CoreError) -> Void) throws(CoreError) {
        let folder = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !folder.isEmpty { try Paths.makeFolder(folder) }
        var changed: [(key: String, value: String?)] = []
        do {
            try LibraryStore.withLock(path + ".lock") {
                var settings = try Settings.load(path: path, droppingUnknown: droppingUnknown)
                let before = settings.values
                try change(&settings)
                try settings.save(path: path)
                for key in Set(before.keys).union(settings.values.keys) where before[key] != settings.values[key] {
                    changed.append((key, settings.values[key]))
                }
                // Recorded under the file's lock (a peer's settings are written under it too).
                if recording && !changed.isEmpty { SyncSettings.record(home: folder, changed) }
            }
        } catch let error as CoreError {
            throw error
        } catch {
            throw CoreError.io(path: path, reason: .systemError)
        }
    }

    /// Sets a shared setting as a peer's journal has it (checked when it came; nil: the default).
    mutating func setShared(_ key: String, _ value: String?) {
        guard SyncSettings.shared.contains(key) else { return }
        values[key] = value
    }

    /// Writes `settings.json` atomically (a temporary file, fsync, rename); `update` is
    /// how a change is written.
    public func save(path: String = Paths.settingsFile) throws(CoreError) {
        let folder = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !folder.isEmpty { try Paths.makeFolder(folder) }
        let data = Array(JSON(encoding: values).pretty.utf8)
        let tmp = path + ".tmp-\(getpid())"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CoreError.io(path: tmp, reason: .systemError) }
        let bytes = [UInt8](data) + [10]
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced, rename(tmp, path) == 0 else {
            let reason = LocalizedText.systemError
            unlink(tmp)
            throw CoreError.io(path: path, reason: reason)
        }
    }
}

/// What the daemon does with the sound device between sessions: HDMI receivers and TVs
/// drop the first second of a stream while they lock on, and many DACs pop when the
/// device opens or closes; a device kept open plays silence between sessions instead.
public enum OutputStandby: String, CaseIterable, Sendable {
    /// Opened for each session and closed after it.
    case close
    /// Held open while the daemon runs (another program cannot use an hw device meanwhile).
    case keepOpen = "keep-open"
    /// Held open from a minute before a scheduled session or bell until it has ended.
    case keepOpenDuringSchedule = "keep-open-during-schedule"
}
