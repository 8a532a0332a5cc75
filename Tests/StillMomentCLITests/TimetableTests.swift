// The timetable file: an export read back by the importer's own line reader is the same
// timetable (random names with quotes, backslashes, `#` and spaces; random entries of every
// kind); entries hold their preset and meditation by id, so a rename keeps them and a
// delete shows them broken; an import is one transaction.
import Foundation
import Glibc
import Testing
@testable import stillmoment
import StillMomentCore

@Suite("The timetable file and its references", .serialized)
struct TimetableTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func store() throws -> (LibraryStore, String) {
        let home = NSTemporaryDirectory() + "sm-timetable-" + UUID().uuidString
        setenv("STILLMOMENT_HOME", home, 1)
        setenv("STILLMOMENT_SOUNDS", root.appendingPathComponent("Sounds").path, 1)
        return (try LibraryStore(home: home), home)
    }

    /// An imported meditation renamed to `name`.
    static func meditation(_ store: LibraryStore, _ name: String) throws -> Meditation {
        let fixture = root.appendingPathComponent("Tests/Fixtures/cbr.mp3").path
        var m: Meditation
        switch try Importer(store: store).importFile(fixture) {
        case .imported(let found), .alreadyThere(let found), .replacedDamagedCopy(let found): m = found
        }
        m.name = name
        try store.update(m)
        return m
    }

    /// A name the names rule takes, made to trip a line reader: quotes of both kinds,
    /// backslashes, `#`, inner spaces, words that look like options, non-ASCII.
    static func randomName(_ rng: inout some RandomNumberGenerator, max: Int) -> String {
        let pieces = ["a", "Z", "0", " ", "\"", "'", "\\", "#", "--name", "-", "ä", "ß", "禅", "🧘", ",", "=", "$", "|", ";", "\\\"", "''"]
        var s = ""
        for _ in 0..<Int.random(in: 1...8, using: &rng) { s += pieces.randomElement(using: &rng) ?? "a" }
        s = String(s.trimmingWhitespace().prefix(max))
        if s.hasPrefix("-") { s = "x" + s }
        return s.isEmpty ? "x" : String(s.prefix(max))
    }

    @Test("export, then the import's line reader: the same entries, for random names and entries of every kind")
    func exportImportIdentity() throws {
        let (store, home) = try Self.store()
        defer { try? FileManager.default.removeItem(atPath: home) }
        var rng = SystemRandomNumberGenerator()
        let catalog = try SoundCatalog.withCustomSounds(store: store)
        var presets: [Preset] = []
        while presets.count < 12 {
            let name = Self.randomName(&rng, max: 60)
            guard try PresetStore(store: store).find(name) == nil else { continue }
            presets.append(try PresetStore(store: store).save(name, request: try TimerRequest(text: ["duration": "20m"]), catalog: catalog))
        }
        let talk = try Self.meditation(store, Self.randomName(&rng, max: 200))
        let schedules = ScheduleStore(store: store)
        let whens = ["daily 06:30", "weekdays 18:00", "weekends 08:00", "mon,wed,fri 07:15", "2099-12-24 07:00",
                     "2099-01-02T03:04:05", "every 45m-90m between 09:00-18:00"]
        var originals: [NewScheduleEntry] = []
        for _ in 0..<200 {
            let when = try ScheduleWhen(parsing: whens.randomElement(using: &rng) ?? "daily 06:30")
            let action: ScheduleAction
            switch Int.random(in: 0..<4, using: &rng) {
            case 0:
                let p = presets.randomElement(using: &rng) ?? presets[0]
                action = .timer(preset: .named(p.name), request: TimerRequest())
            case 1:
                var options: [String: String] = ["interval": "5m", "ambience": "forest"]
                let sections = Bool.random(using: &rng)
                if sections { options["sections"] = "sit 25m, walk 5m, sit 25m" } else { options["duration"] = "45m" }
                if Bool.random(using: &rng) { options["bells"] = "1m,-2m" }
                // A preset's duration and --sections exclude each other.
                let p = !sections && Bool.random(using: &rng) ? presets.randomElement(using: &rng).map { LibraryRef.named($0.name) } : nil
                action = .timer(preset: p, request: try TimerRequest(text: options))
            case 2: action = .play(meditation: .named(talk.name))
            default: action = .bell(sound: "temple-bell", strikes: Int.random(in: 1...9, using: &rng), volume: [1, 0.4, 0.75].randomElement(using: &rng) ?? 1)
            }
            let name = Bool.random(using: &rng) ? Self.randomName(&rng, max: 80) : nil
            originals.append(NewScheduleEntry(when: when, action: try schedules.bind(action), name: name, enabled: Bool.random(using: &rng)))
        }
        try schedules.add(originals, replacing: false, now: 1_800_000_000)
        let exported = try schedules.all()
        #expect(exported.count == originals.count)
        var read: [NewScheduleEntry] = []
        for e in exported {
            let line = e.line
            var entry = try ScheduleCommand.EntryOptions.parse(try ShellWords.split(line)).entry()
            try entry.checkForTimetable()
            entry.action = try schedules.bind(entry.action)
            read.append(entry)
            #expect(entry.when == e.when && entry.action == e.action && entry.name == e.name && entry.enabled == e.enabled, "\(line)")
        }
        #expect(read == originals)
    }

    @Test("a word written by quote is read back as that word, whatever it holds")
    func quoting() throws {
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("ab \"'\\#$;|=,-ä禅\t")
        for _ in 0..<5000 {
            let word = String((0..<Int.random(in: 0...12, using: &rng)).map { _ in alphabet.randomElement(using: &rng) ?? "a" })
            #expect(try ShellWords.split(ShellWords.quote(word)) == [word], "\(word.debugDescription) → \(ShellWords.quote(word))")
            #expect(try ShellWords.split("--name " + ShellWords.quote(word) + " # comment") == ["--name", word])
        }
    }

    @Test("a word that begins with a combining mark stays a word of its own, and one with a mark on a # or a quote is quoted (found by fuzz/schedule)")
    func combiningMark() throws {
        let words = ["\u{350},+", "a", "\u{301}", "x\u{20}\u{301}y", "#\u{301}x", "'\u{301}", "\\\u{301}"]
        let line = words.map(ShellWords.quote).joined(separator: " ")
        #expect(try ShellWords.split(line) == words)
        #expect(try ShellWords.split("play \u{350}x") == ["play", "\u{350}x"])
    }

    @Test("entries hold their preset and meditation by id: a rename keeps them, a delete needs force and shows them broken")
    func references() throws {
        let (store, home) = try Self.store()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let catalog = try SoundCatalog.withCustomSounds(store: store)
        let presets = PresetStore(store: store), schedules = ScheduleStore(store: store)
        _ = try presets.save("evening sit", request: try TimerRequest(text: ["duration": "20m"]), catalog: catalog)
        let talk = try Self.meditation(store, "Body scan")
        let sit = try schedules.add(when: try ScheduleWhen(parsing: "daily 19:00"),
                                    action: try schedules.bind(.timer(preset: .named("evening sit"), request: TimerRequest())), name: "Evening", now: 1_800_000_000)
        let play = try schedules.add(when: try ScheduleWhen(parsing: "daily 07:00"),
                                     action: try schedules.bind(.play(meditation: .named("body scan"))), name: nil, now: 1_800_000_000)
        try presets.rename("evening sit", to: "Abendsitzung")
        var m = talk
        m.name = "Körperreise"
        try store.update(m)
        #expect(try schedules.find(sit.id)?.action.description == "--preset Abendsitzung" && schedules.find(sit.id)?.problem == nil)
        #expect(try schedules.find(play.id)?.action.description == "--play Körperreise" && schedules.find(play.id)?.problem == nil)

        #expect(throws: CoreError.inUse(what: both("the preset 'Abendsitzung'", "die Vorlage 'Abendsitzung'"), entries: ["\(sit.id) (Evening)"])) { try presets.delete("Abendsitzung") }
        #expect(throws: CoreError.self) { try store.delete(m) }
        #expect(try presets.find("Abendsitzung") != nil && store.all().count == 1)
        try presets.delete("Abendsitzung", force: true)
        try store.delete(m, force: true)
        #expect(try schedules.find(sit.id)?.problem == .presetGone("Abendsitzung"))
        #expect(try schedules.find(play.id)?.problem == .meditationGone("Körperreise"))
    }

    @Test("an import is one transaction: over the limit nothing is stored and the old timetable stays; a device is refused")
    func atomicImport() throws {
        let (store, home) = try Self.store()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let schedules = ScheduleStore(store: store)
        let bell = NewScheduleEntry(when: try ScheduleWhen(parsing: "daily 05:30"), action: .bell(sound: "temple-bell", strikes: 1, volume: 1), name: "old")
        try schedules.add([bell], replacing: false, now: 1_800_000_000)
        let many = Array(repeating: bell, count: ScheduleStore.maxEntries + 1)
        #expect(throws: CoreError.self) { try schedules.add(many, replacing: true, now: 1_800_000_000) }
        #expect(throws: CoreError.self) { try schedules.add(Array(many.prefix(ScheduleStore.maxEntries)), replacing: false, now: 1_800_000_000) }
        #expect(try schedules.all().map(\.name) == ["old"])
        let version = try schedules.version()
        try schedules.add(Array(many.prefix(ScheduleStore.maxEntries)), replacing: true, now: 1_800_000_000)
        #expect(try schedules.all().count == ScheduleStore.maxEntries && schedules.version() > version)
        let line = "daily 06:00 --duration 45m --name \"Morning sit\" --device file:FILE=\"|id>/tmp/proof\",FORMAT=raw"
        #expect(throws: CoreError.self) { try ScheduleCommand.EntryOptions.parse(try ShellWords.split(line)).entry() }
        let plain = "daily 06:00 --duration 45m --name \"Morning sit\" --device hw:1,0"
        #expect(throws: CoreError.self) { try ScheduleCommand.EntryOptions.parse(try ShellWords.split(plain)).entry().checkForTimetable() }
    }
}
