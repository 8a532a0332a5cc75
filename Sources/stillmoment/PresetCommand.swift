import ArgumentParser
import FoundationEssentials
import StillMomentCore

/// `preset`: saved timers, so nobody types twelve flags every morning.
struct PresetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preset",
        abstract: "Saved timers: `stillmoment timer --preset NAME` sits with one.",
        subcommands: [Save.self, List.self, Show.self, Rename.self, Delete.self])

    struct Save: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "save", abstract: "Save timer options under a name (checked now, not on some morning later).")
        @Argument(help: "The preset's name.") var name: String
        @Argument(help: "How long to sit (or give --duration or --sections).") var duration: String?
        @OptionGroup var options: TimerOptions

        func run() throws {
            // --device is kept: a preset may say where it plays (the bedroom's speaker);
            // the timer's own --device overrides it, and the check below opens nothing.
            var text = options.text
            if let duration {
                guard text["duration"] == nil else {
                    throw Console.fail(CoreError.badRequest(both("give the duration once: DURATION or --duration",
                                                               "gib die Dauer nur einmal an: DURATION oder --duration")))
                }
                text["duration"] = duration
            }
            let store = try openStore()
            do {
                let catalog = try SoundCatalog.withCustomSounds(store: store)
                let saved = try PresetStore(store: store).save(name, request: try TimerRequest(text: text), catalog: catalog)
                Console.out((Language.current == .de ? "Vorlage gespeichert: " : "saved preset: ") + saved.name
                            + "  " + PresetText.summary(saved.request))
            } catch {
                throw Console.fail(error)
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the presets.")
        @Flag(help: "Print JSON.") var json = false
        func run() throws {
            let store = try openStore()
            let all: [Preset]
            do { all = try PresetStore(store: store).all() } catch { throw Console.fail(error) }
            if json {
                Console.out(jsonText(all.map { PresetText.JSONPreset(name: $0.name, options: PresetText.options($0.request)) }))
                return
            }
            if all.isEmpty {
                Console.out(Language.current == .de ? "noch keine Vorlagen (`stillmoment preset save NAME 20m --interval 5m`)"
                                                    : "no presets yet (`stillmoment preset save NAME 20m --interval 5m`)")
            }
            for p in all { Console.out("\(p.name.padded(to: 20)) \(PresetText.summary(p.request))") }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "The full timer a preset gives, and where each value comes from.")
        @Argument(help: "The preset's name.", completion: Complete.presets) var name: String
        @Flag(help: "Print JSON.") var json = false
        func run() throws {
            let store = try openStore()
            let preset: Preset
            let settings: Settings
            do {
                preset = try PresetStore(store: store).require(name)
                settings = try Settings.load()
            } catch {
                throw Console.fail(error)
            }
            let fromPreset = PresetText.options(preset.request)
            var rows: [(key: String, value: String, source: String)] = []
            for option in TimerOption.allCases {
                if let v = fromPreset[option.rawValue] {
                    rows.append((option.rawValue, v, "preset"))
                } else if option.isSetting {
                    rows.append((option.rawValue, settings.value(option.rawValue), settings.isDefault(option.rawValue) ? "default" : "settings"))
                }
            }
            if json {
                struct Value: Encodable { let value: String; let source: String }
                struct Shown: Encodable { let name: String; let options: [String: Value] }
                let values = Dictionary(uniqueKeysWithValues: rows.map { ($0.key, Value(value: $0.value, source: $0.source)) })
                Console.out(jsonText(Shown(name: preset.name, options: values)))
                return
            }
            let de = Language.current == .de
            Console.out((de ? "Vorlage " : "preset ") + preset.name)
            let sources = de ? ["preset": "Vorlage", "settings": "Einstellungen", "default": "Vorgabe"] : [:]
            for r in rows { Console.out("  \(r.key.padded(to: 16)) \(r.value.padded(to: 24)) (\(sources[r.source] ?? r.source))") }
        }
    }

    struct Rename: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rename", abstract: "Rename a preset.")
        @Argument(help: "The preset's name.", completion: Complete.presets) var old: String
        @Argument(help: "Its new name.") var new: String
        func run() throws {
            let store = try openStore()
            do { try PresetStore(store: store).rename(old, to: new) } catch { throw Console.fail(error) }
            Console.out((Language.current == .de ? "umbenannt: " : "renamed: ") + "\(old) → \(new)")
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete a preset.")
        @Argument(help: "The preset's name.", completion: Complete.presets) var name: String
        @Flag(help: "Delete it even when schedule entries use it (they then show as broken).") var force = false
        func run() throws {
            let store = try openStore()
            let presets = PresetStore(store: store), name = self.name, force = self.force
            do { try Console.deleteAsking { (asked) throws(CoreError) in try presets.delete(name, force: force || asked) } } catch {
                throw Console.fail(error)
            }
            Console.out((Language.current == .de ? "gelöscht: " : "deleted: ") + name)
        }
    }
}

/// Presets as text: the options they set, in the words of the command line.
enum PresetText {
    struct JSONPreset: Encodable {
        let name: String
        let options: [String: String]
    }

    /// The options a request sets, as they would be typed.
    static func options(_ r: TimerRequest) -> [String: String] { r.text }

    static func summary(_ r: TimerRequest) -> String {
        options(r).sorted { $0.key < $1.key }.map { "--\($0.key) \($0.value)" }.joined(separator: " ")
    }
}

/// `timer --plan`: every gong of a session, when, which sound, how loud and why.
enum PlanText {
    struct JSONGong: Encodable {
        let time: Double
        let frame: Int64
        let sound: String
        let volume: Double
        let reason: String
    }

    struct JSONPlan: Encodable {
        let sampleRate: Int
        let preparation: Double
        let duration: Double
        let total: Double
        let seed: String?
        let sections: String?
        let gongs: [JSONGong]
    }

    /// Why a gong sounds, in German (`timer --plan`).
    static let reasons: [GongReason: String] = [
        .start: "Start", .interval: "Intervall", .bell: "Glocke", .random: "Zufall", .section: "Abschnitt", .end: "Ende",
    ]

    static func print(_ plan: TimerPlan, configuration c: TimerConfiguration, json: Bool) {
        let seconds = { (frames: Int64) -> Double in Double(frames) / Double(plan.rate) }
        if json {
            Console.out(jsonText(JSONPlan(
                sampleRate: plan.rate, preparation: Double(c.preparation) / 1000, duration: Double(c.duration) / 1000,
                total: seconds(plan.total), seed: c.seed.map { String($0) }, sections: c.sections?.description,
                gongs: plan.gongs.map { JSONGong(time: Double($0.milliseconds) / 1000, frame: $0.frame, sound: $0.sound,
                                                 volume: $0.volume, reason: $0.reason.rawValue) })))
            return
        }
        let de = Language.current == .de
        if let sections = c.sections { Console.out((de ? "Abschnitte: " : "sections: ") + sections.description) }
        if let seed = c.seed { Console.out((de ? "Startwert: " : "seed: ") + "\(seed)") }
        for g in plan.gongs {
            let sign = g.milliseconds < 0 ? "-" : " "
            let reason = de ? reasons[g.reason] ?? g.reason.rawValue : g.reason.rawValue
            Console.out("\(sign)\(TimeText.clock(abs(g.milliseconds)).padded(to: 9)) \(reason.padded(to: 9)) \(g.sound.padded(to: 16)) \(g.volume)")
        }
        Console.out((de ? "Länge mit Vorbereitung und Ausklang: " : "length with preparation and ring-out: ") + TimeText.clock(plan.milliseconds(plan.total)))
    }
}
