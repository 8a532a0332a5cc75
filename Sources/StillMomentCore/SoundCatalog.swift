import FoundationEssentials

/// A sound the timer can play: a gong, an interval gong or an ambience.
public struct Sound: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable { case gong, interval, ambience }
    public var id: String
    /// File name in the sounds folder (nil for `silent`); for imported sounds an absolute path.
    public var filename: String?
    public var kind: Kind
    /// The sound's default playback volume.
    public var volume: Double
    public var name: LocalizedText
    public var description: LocalizedText
    /// Its length in frames as counted at the import (an imported sound; nil: not known).
    public var frames: Int64? = nil
}

/// The bundled sounds (`Sounds/sounds.json`) and any imported into the store.
public struct SoundCatalog: Sendable {
    public let folder: String
    public private(set) var sounds: [Sound]

    public init(folder: String, sounds: [Sound]) {
        self.folder = folder
        self.sounds = sounds
    }

    /// Loads the bundled catalog.
    public static func bundled() throws(CoreError) -> SoundCatalog {
        guard let folder = Paths.sounds else { throw CoreError.noSounds }
        return try load(folder: folder)
    }

    public static func load(folder: String) throws(CoreError) -> SoundCatalog {
        let path = folder + "/sounds.json"
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CoreError.io(path: path, reason: both("cannot read it", "kann nicht gelesen werden"))
        }
        do {
            return SoundCatalog(folder: folder, sounds: try JSON.decode([Sound].self, from: data))
        } catch {
            throw CoreError.damaged(both("\(path): not a valid sound list (\(error))", "\(path): keine gültige Klangliste (\(error))"))
        }
    }

    /// The bundled sounds plus those imported into the store.
    public static func withCustomSounds(store: LibraryStore) throws(CoreError) -> SoundCatalog {
        var catalog = try bundled()
        let lengths = store.soundLengths()
        for custom in try store.customSounds() {
            let kind: Sound.Kind = custom.kind == "ambience" ? .ambience : .gong
            catalog.add(Sound(id: custom.id, filename: store.soundsFolder + "/" + custom.storedFile, kind: kind,
                              volume: kind == .ambience ? 0.15 : 1.0,
                              name: LocalizedText(en: custom.name, de: custom.name),
                              description: LocalizedText(en: "imported", de: "importiert"),
                              frames: lengths[custom.storedFile].flatMap { LibraryStore.plausible($0, size: custom.size) ? $0 : nil }))
        }
        return catalog
    }

    public mutating func add(_ sound: Sound) {
        sounds.removeAll { $0.id == sound.id }
        sounds.append(sound)
    }

    /// Sounds usable as `kind` (an interval gong may also be any gong, and vice versa).
    public func ids(for kinds: Set<Sound.Kind>) -> [String] {
        sounds.filter { kinds.contains($0.kind) }.map(\.id)
    }

    public func sound(_ id: String, kinds: Set<Sound.Kind>, role: String) throws(CoreError) -> Sound {
        guard let s = sounds.first(where: { $0.id == id && kinds.contains($0.kind) }) else {
            throw CoreError.unknownSound(id: id, kind: role, valid: ids(for: kinds))
        }
        return s
    }

    public func gong(_ id: String) throws(CoreError) -> Sound {
        try sound(id, kinds: [.gong, .interval], role: tr("gong", "Gong"))
    }

    public func ambience(_ id: String) throws(CoreError) -> Sound {
        try sound(id, kinds: [.ambience], role: tr("ambience", "Klangkulisse"))
    }

    /// The file of a sound (nil for `silent`).
    public func path(of sound: Sound) -> String? {
        guard let f = sound.filename else { return nil }
        return f.hasPrefix("/") ? f : folder + "/" + f
    }
}
