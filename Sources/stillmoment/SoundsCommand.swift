import ArgumentParser
import StillMomentCore

struct SoundsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sounds",
        abstract: "List the gongs and ambiences (in German when LANG says so), or import your own.",
        subcommands: [List.self, Import.self],
        defaultSubcommand: List.self
    )

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "import", abstract: "Copy a gong or an ambience into the store; use it by its new id in `timer`.")
        @Argument(help: "An MP3 or M4A file.", completion: Complete.audioFiles) var file: String
        @Option(help: "gong or ambience.", completion: Complete.kinds) var kind: String
        @Option(help: "Its name; the id is made from it (\"My Bell\" → my-bell).") var name: String

        func run() throws {
            let store = try openStore()
            do {
                guard let k = ["gong": Sound.Kind.gong, "ambience": .ambience][kind.lowercased()] else {
                    throw CoreError.badValue(option: "--kind", reason: both("'\(kind)' is not gong or ambience", "'\(kind)' ist weder gong noch ambience"))
                }
                let catalog = try SoundCatalog.withCustomSounds(store: store)
                let raw = RawArgument(file)
                defer { raw?.close() }
                let sound = try Importer(store: store).importSound(raw?.path ?? file, kind: k, name: name, catalog: catalog)
                let option = "--\(k == .ambience ? "ambience" : "gong") \(sound.id)"
                Console.out(k == .ambience
                    ? tr("imported \(file) as \(sound.kind) '\(sound.id)' (use \(option))", "\(file) als Klangkulisse '\(sound.id)' importiert (nimm sie mit \(option))")
                    : tr("imported \(file) as \(sound.kind) '\(sound.id)' (use \(option))", "\(file) als Gong '\(sound.id)' importiert (nimm ihn mit \(option))"))
            } catch let error as CoreError {
                throw Console.fail(error)
            }
        }
    }
}

extension SoundsCommand {
    struct List: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the sounds.")

    func run() throws {
        let catalog: SoundCatalog
        do {
            catalog = try SoundCatalog.withCustomSounds(store: try LibraryStore())
        } catch {
            throw Console.fail(error)
        }
        let language = Language.current
        let headings: [(Sound.Kind, String, String)] = [
            (.gong, "Gongs", "Gongs"),
            (.interval, "Interval gongs", "Intervallgongs"),
            (.ambience, "Ambiences", "Klangkulissen"),
        ]
        for (kind, en, de) in headings {
            let sounds = catalog.sounds.filter { $0.kind == kind }
            guard !sounds.isEmpty else { continue }
            Console.out(language == .de ? de : en)
            let width = sounds.map(\.id.count).max() ?? 0
            for s in sounds {
                let id = s.id.padded(to: width + 2)
                Console.out("  \(id)\(s.name.text(language)): \(s.description.text(language))")
            }
        }
    }
}
}
