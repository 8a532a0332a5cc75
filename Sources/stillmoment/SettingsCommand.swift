import ArgumentParser
import StillMomentCore

struct SettingsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settings",
        abstract: "Show or change the timer's defaults (settings.json).",
        discussion: """
            Besides the timer's options: web-listen and web-max-upload (the web app), and
            output-standby = close | keep-open | keep-open-during-schedule (the default):
            whether the daemon keeps the sound device open between sessions, playing
            silence, so that a receiver or DAC does not swallow the start gong.
            """,
        subcommands: [Show.self, Set.self, Reset.self],
        defaultSubcommand: Show.self
    )

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Show every setting and where it comes from.")
        func run() throws {
            let settings: Settings
            do { settings = try Settings.load() } catch { throw Console.fail(error) }
            let width = Settings.keys.map(\.count).max() ?? 0
            for key in Settings.keys {
                let k = key.padded(to: width + 2)
                Console.out("\(k)\(settings.value(key))\(settings.isDefault(key) ? tr("  (default)", "  (Vorgabe)") : "")")
            }
            Console.out("(\(Paths.settingsFile))")
        }
    }

    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set", abstract: "Set KEY to VALUE, e.g. `settings set duration 20m`.")
        @Argument(help: "The setting, named like the timer's option (duration, gong, ambience-volume, …).", completion: Complete.settingKeys)
        var key: String
        @Argument(help: "The value, as you would give it to the option.")
        var value: String

        func run() throws {
            do {
                let catalog = try SoundCatalog.withCustomSounds(store: try LibraryStore())
                try Settings.update { settings throws(CoreError) in try settings.set(key, value, catalog: catalog) }
                Console.out("\(key) = \(value)")
            } catch {
                throw Console.fail(error)
            }
        }
    }

    struct Reset: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "reset", abstract: "Return KEY (or every setting) to its default.")
        @Argument(help: "The setting to reset; all when omitted.")
        var key: String?

        func run() throws {
            do {
                // Read leniently: a key that is no setting (a typo in a hand edit) is dropped
                // here, by name or with everything, so that the file is mended.
                try Settings.update(droppingUnknown: true) { settings throws(CoreError) in
                    if let key {
                        let strict = try? Settings.load()
                        guard Settings.keys.contains(key) || strict == nil else {
                            throw Settings.unknown(key)
                        }
                        settings.reset(key)
                    } else {
                        settings = Settings()
                    }
                }
            } catch {
                throw Console.fail(Console.text(error), code: Exit.usage)
            }
        }
    }
}
