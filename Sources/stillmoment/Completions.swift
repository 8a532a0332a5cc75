import ArgumentParser
import StillMomentCore

/// What the shells complete (bash, zsh, fish through ArgumentParser's scripts): files for
/// imports, meditation ids and names from the library, sound ids from the catalog.
enum Complete {
    static let audioFiles = CompletionKind.file(extensions: ["mp3", "m4a", "mp2", "aac"])
    static let modes = CompletionKind.list(IntervalMode.allCases.map(\.rawValue))
    static let kinds = CompletionKind.list(["gong", "ambience"])
    static let settingKeys = CompletionKind.list(Settings.keys)

    /// Meditation ids (8 characters, unique in practice) and exact names.
    static let meditations = CompletionKind.custom { _, _, prefix in
        guard let store = try? LibraryStore(), let all = try? store.all() else { return [] }
        let words = all.map { String($0.id.prefix(8)) } + all.map { Display.clean($0.name) }
        return words.filter { $0.lowercased().hasPrefix(prefix.lowercased()) }
    }

    /// Saved presets' names.
    static let presets = CompletionKind.custom { _, _, prefix in
        guard let store = try? LibraryStore(), let all = try? PresetStore(store: store).all() else { return [] }
        return all.map(\.name).filter { $0.lowercased().hasPrefix(prefix.lowercased()) }
    }

    static let gongs = CompletionKind.custom { _, _, prefix in
        (soundIDs([.gong, .interval]) + ["off"]).filter { $0.hasPrefix(prefix) }
    }
    static let ambiences = CompletionKind.custom { _, _, prefix in
        (["silent"] + soundIDs([.ambience])).filter { $0.hasPrefix(prefix) }
    }

    static func soundIDs(_ kinds: Set<Sound.Kind>) -> [String] {
        guard let store = try? LibraryStore(), let catalog = try? SoundCatalog.withCustomSounds(store: store) else {
            return []
        }
        return catalog.sounds.filter { kinds.contains($0.kind) }.map(\.id)
    }
}
