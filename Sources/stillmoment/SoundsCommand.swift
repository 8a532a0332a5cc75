import ArgumentParser
import StillMomentCore

struct SoundsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sounds",
        abstract: "List the gongs and ambiences (in German when LANG says so)."
    )

    func run() throws {
        let catalog: SoundCatalog
        do { catalog = try SoundCatalog.bundled() } catch { throw Console.fail(error.description) }
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
