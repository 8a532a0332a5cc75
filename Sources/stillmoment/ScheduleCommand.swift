import ArgumentParser
import FoundationEssentials
import Glibc
import StillMomentControl
import StillMomentCore

/// `schedule`: the daemon keeps time (daily sits, retreat timetables, mindfulness bells).
struct ScheduleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schedule",
        abstract: "Sits, guided meditations and bells the daemon rings by itself.",
        discussion: """
            WHEN: daily 06:30 | weekdays 06:30 | weekends 08:00 | mon,wed,fri 18:00 | 2026-12-24 07:00 | \
            2026-12-24T07:00:30 | every 45m-90m between 09:00-18:00 (random bells in a daily window). \
            ACTION: --preset NAME and/or timer options (--duration 20m --interval 5m …), --play MEDITATION, or \
            --bell SOUND [--strikes N] [--volume V]. Local wall-clock times (TZ honoured). Nothing that plays is \
            interrupted: a bell rings only when nothing plays (else it is skipped and recorded), a sit or a guided \
            meditation waits up to 10 minutes for the device (then it is recorded as missed). After a clock jump \
            forward, entries passed within 5 minutes still ring; older ones are recorded as missed.
            """,
        subcommands: [Add.self, List.self, Upcoming.self, Remove.self, Disable.self, Enable.self, Skip.self,
                      Off.self, On.self,
                      Import.self, Export.self, RingNow.self])

    static let policy = "policy: nothing that plays is interrupted; a bell is skipped then, a sit or guided meditation waits up to 10 min; entries more than 5 min late are missed"
    static let policyDE = "Regel: nichts, was gerade spielt, wird unterbrochen; eine Glocke fällt dann aus, eine Sitzung oder geführte Meditation wartet bis zu 10 min; Einträge, die mehr als 5 min zu spät kämen, werden ausgelassen"

    /// The entry's words as the command line and the file format take them.
    struct EntryOptions: ParsableArguments {
        @Argument(help: "WHEN, then nothing else: daily 06:30, 2026-12-24 07:00, every 45m-90m between 09:00-18:00 …")
        var when: [String] = []
        @OptionGroup var timer: TimerOptions
        @Option(help: "A sit with this preset (timer options given override it).", completion: Complete.presets) var preset: String?
        @Option(help: "A guided meditation from the library.", completion: Complete.meditations) var play: String?
        @Option(help: "A bell only (no session): a gong's id.", completion: Complete.gongs) var bell: String?
        @Option(help: "The bell's volume, 0 to 1.") var volume: String?
        @Option(help: "A bell for several rooms: hall,garden or all (every node of the site keeps it and rings it at its time).")
        var rooms: String?
        @Option(help: "A name for the entry.") var name: String?
        @Option(help: "The sync devices it runs on, by their names (pi-hall,pi-bedroom), or all (the default).")
        var devices: String?
        @Flag(help: "Keep the entry but do not ring it (as `schedule disable`).") var disabled = false

        /// The entry as typed: its preset and meditation by name, to be bound (`ScheduleStore.bind`).
        func entry() throws(CoreError) -> NewScheduleEntry {
            let when = try ScheduleWhen(parsing: self.when.joined(separator: " "))
            var text = timer.text
            let sitOptions = text.keys.filter { bell == nil || $0 != "strikes" }
            let kinds = [preset != nil || !sitOptions.isEmpty, play != nil, bell != nil].filter { $0 }.count
            guard kinds == 1 else {
                throw CoreError.badRequest(kinds == 0
                    ? both("say what to do: --preset NAME, timer options, --play MEDITATION or --bell SOUND",
                         "sag, was geschehen soll: --preset NAME, Timer-Optionen, --play MEDITATION oder --bell KLANG")
                    : both("one action per entry: a sit (--preset, timer options), --play or --bell",
                         "eine Aktion je Eintrag: eine Sitzung (--preset, Timer-Optionen), --play oder --bell"))
            }
            let action: ScheduleAction
            if let bell {
                let strikes = try text["strikes"].map { (s) throws(CoreError) -> Int in
                    guard case .count(let n) = try TimerValue.parse(s, as: .strikes) else { return 1 }
                    return n
                } ?? 1
                text["strikes"] = nil
                guard text.isEmpty else {
                    throw CoreError.badRequest(both("a bell takes --strikes and --volume only", "eine Glocke nimmt nur --strikes und --volume"))
                }
                var v = 1.0
                if let volume {
                    guard case .volume(let parsed) = try TimerValue.parse(volume, as: .gongVolume) else { throw CoreError.badRequest(.same("--volume")) }
                    v = parsed
                }
                action = .bell(sound: bell, strikes: strikes, volume: v)
            } else if let play {
                action = .play(meditation: .named(play))
            } else {
                guard volume == nil else {
                    throw CoreError.badRequest(both("--volume goes with --bell (a sit takes --gong-volume)",
                                                  "--volume gehört zu --bell (eine Sitzung nimmt --gong-volume)"))
                }
                action = .timer(preset: preset.map(LibraryRef.named), request: try TimerRequest(text: text))
            }
            let entry = NewScheduleEntry(when: when, action: action, name: try name.map(ScheduleStore.checkName), enabled: !disabled,
                                         rooms: try rooms.map { r throws(CoreError) in try RoomChoice(parsing: r) },
                                         devices: try devices.flatMap { d throws(CoreError) in try NewScheduleEntry.devices(parsing: d) })
            if entry.rooms != nil && entry.devices != nil {
                throw CoreError.badRequest(both("--rooms and --devices do not go together (a bell for rooms rings on every node of the site)",
                                              "--rooms und --devices gehen nicht zusammen (eine Glocke für Räume läutet auf jedem Knoten des Orts)"))
            }
            try entry.checkRooms()
            return entry
        }
    }

    /// Tells a running daemon to look at the schedule again; with `start`, starts one
    /// (an on-demand daemon with a schedule stays).
    static func notifyDaemon(start: Bool) {
        do {
            let client = try ControlClient.connect(startIfNeeded: start)
            try client.send(.reschedule)
        } catch {
            if start { Console.warning(tr("the daemon could not be told: \(error.description)", "der Daemon ließ sich nicht benachrichtigen: \(error.description)")) }
        }
    }

    /// The schedule's service, telling the daemon of each change (starting one when `start`).
    static func service(_ store: LibraryStore, start: Bool) -> ScheduleService {
        ScheduleService(store: store) { notifyDaemon(start: start) }
    }

    /// One line when the daemon is not a systemd user service (it must run for schedules).
    static func serviceHint() {
        guard access("/usr/bin/systemctl", X_OK) == 0 || access("/bin/systemctl", X_OK) == 0,
              let pipe = popen("systemctl --user is-enabled stillmoment 2>/dev/null", "r") else { return }
        var buf = [CChar](repeating: 0, count: 64)
        let line = fgets(&buf, 64, pipe) != nil ? String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).trimmingWhitespace() : ""
        pclose(pipe)
        guard line != "enabled" else { return }
        Console.err(Language.current == .de
            ? "Hinweis: der Daemon ist kein Dienst; damit der Zeitplan auch nach einem Neustart läutet: `systemctl --user enable --now stillmoment` und `loginctl enable-linger $USER`"
            : "note: the daemon is not a service; for the schedule to ring after a reboot too: `systemctl --user enable --now stillmoment` and `loginctl enable-linger $USER`")
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Add an entry: WHEN ACTION [--name NAME].")
        @OptionGroup var entry: EntryOptions

        func run() throws {
            let store = try openStore()
            let service = ScheduleCommand.service(store, start: true)
            do throws(CoreError) {
                let added = try service.add(try entry.entry())
                let next = try service.listing().entries.first { $0.id == added.id }?.next.flatMap { LocalTime(iso8601: $0) }
                Console.out((Language.current == .de ? "Eintrag \(added.id): " : "entry \(added.id): ") + "\(added.when) \(added.action)"
                            + (next.map { Language.current == .de ? "; als Nächstes \(PracticeText.when($0))" : "; next \(PracticeText.when($0))" } ?? ""))
            } catch {
                throw Console.fail(error)
            }
            ScheduleCommand.serviceHint()
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "The entries, each with its next time and what last happened.")
        @Flag(help: "Print JSON.") var json = false
        func run() throws {
            let store = try openStore()
            let listing: (entries: [ScheduleListing], quietDays: [CivilDate])
            let offSince: Int64?
            do {
                let service = ScheduleService(store: store)
                listing = try service.listing()
                offSince = try service.offSince()
            } catch { throw Console.fail(error) }
            if json {
                struct Listing: Encodable { let entries: [ScheduleListing]; let quietDays: [String]; let on: Bool; let policy: String }
                Console.out(jsonText(Listing(entries: listing.entries, quietDays: listing.quietDays.map(\.description), on: offSince == nil,
                                             policy: ScheduleCommand.policy)))
                return
            }
            if let offSince {
                let since = PracticeText.when(ZoneRules.system().localTime(offSince))
                Console.out(tr("the schedule is off (since \(since)): nothing rings until `schedule on`",
                               "der Zeitplan ist aus (seit \(since)): nichts läutet bis `schedule on`"))
            }
            if listing.entries.isEmpty { Console.out(Language.current == .de ? "der Zeitplan ist leer" : "the schedule is empty") }
            for i in listing.entries {
                let next = i.next.flatMap { LocalTime(iso8601: $0) }.map { PracticeText.when($0) } ?? (i.enabled ? "-" : tr("off", "aus"))
                Console.out("\(String(i.id).padded(to: 4)) \(next.padded(to: 17)) \(i.when)  \(i.action)\(i.name.map { "  (\($0))" } ?? "")"
                            + (i.rooms.map { tr("  [rooms \($0)", "  [Räume \($0)") + (i.from.map { tr(", from \($0)]", ", von \($0)]") } ?? "]") } ?? "")
                            + (i.devices.map { d in (i.elsewhere == true ? tr("  [on \(d) only, not here]", "  [nur auf \(d), nicht hier]") : tr("  [on \(d)]", "  [auf \(d)]")) } ?? "")
                            + (i.lastOutcome.map { tr("  [last: \($0)]", "  [zuletzt: \($0)]") } ?? "")
                            + (i.broken.map { tr("  [broken: \($0)]", "  [kaputt: \($0)]") } ?? ""))
            }
            if !listing.quietDays.isEmpty {
                Console.out((Language.current == .de ? "stille Tage: " : "quiet days: ") + listing.quietDays.map(\.description).joined(separator: ", "))
            }
            Console.out(tr(ScheduleCommand.policy, ScheduleCommand.policyDE))
        }
    }

    struct Upcoming: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "upcoming", abstract: "A dry run: exactly what would ring, and when.")
        @Option(help: "From this time (2026-12-24 or 2026-12-24T06:00:00).") var from: String?
        @Option(help: "Until this time (default: a week after --from).") var until: String?
        @Option(help: "At most N items (default 50).") var count: Int = 50
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let zone = ZoneRules.system()
            func instant(_ text: String?, _ option: String, default value: Int64) throws -> Int64 {
                guard let text else { return value }
                if let d = CivilDate(text) { return ScheduleWhen.instant(d, 0, zone) }
                if let t = LocalTime(iso8601: text) { return t.unix }
                if text.count == 19, let d = CivilDate(String(text.prefix(10))), let s = ScheduleWhen.clock(String(text.suffix(8))) {
                    return ScheduleWhen.instant(d, s, zone)
                }
                throw Console.fail(CoreError.badValue(option: option, reason: both("'\(text)' is not a date or date-time like 2026-12-24T06:00:00",
                                                                                 "'\(text)' ist kein Datum und keine Uhrzeit wie 2026-12-24T06:00:00")))
            }
            guard (1...10_000).contains(count) else {
                throw Console.fail(CoreError.badValue(option: "--count", reason: both("\(count) is not from 1 to 10000", "\(count) liegt nicht zwischen 1 und 10000")))
            }
            let start = try instant(from, "--from", default: LocalTime.now().unix)
            let end = try instant(until, "--until", default: start + 7 * 86_400)
            let store = try openStore()
            let items: [(at: Int64, entry: ScheduleEntry)]
            do { items = try ScheduleService(store: store, zone: zone).upcoming(from: start, until: end, count: count) } catch { throw Console.fail(error) }
            if json {
                struct Item: Encodable { let at: String; let id: Int64; let name: String?; let action: String }
                Console.out(jsonText(items.map { Item(at: zone.localTime($0.at).iso8601, id: $0.entry.id, name: $0.entry.name,
                                                      action: $0.entry.action.description) }))
                return
            }
            if items.isEmpty { Console.out(Language.current == .de ? "nichts läutet in dieser Zeit" : "nothing rings then") }
            for i in items {
                Console.out("\(zone.localTime(i.at).iso8601)  \(String(i.entry.id).padded(to: 4)) \(i.entry.action)\(i.entry.name.map { "  (\($0))" } ?? "")")
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove an entry.")
        @Argument(help: "The entry's id (see `schedule list`).") var id: String
        func run() throws {
            let store = try openStore()
            do {
                let e = try ScheduleCommand.service(store, start: false).remove(id)
                Console.out((Language.current == .de ? "entfernt: " : "removed: ") + "\(e.id) \(e.when) \(e.action)")
            } catch { throw Console.fail(error) }
        }
    }

    struct Disable: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "disable", abstract: "Keep an entry but ring it no more.")
        @Argument(help: "The entry's id.") var id: String
        func run() throws { try ScheduleCommand.setEnabled(id, false) }
    }

    struct Enable: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "enable", abstract: "Ring a disabled entry again (from now on).")
        @Argument(help: "The entry's id.") var id: String
        func run() throws { try ScheduleCommand.setEnabled(id, true) }
    }

    static func setEnabled(_ id: String, _ on: Bool) throws {
        let store = try openStore()
        do {
            let e = try service(store, start: on).setEnabled(id, on)
            Console.out("\(e.id) \(e.when) \(e.action): " + (on ? (Language.current == .de ? "an" : "enabled") : (Language.current == .de ? "aus" : "disabled")))
        } catch { throw Console.fail(error) }
    }

    struct Skip: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "skip", abstract: "A quiet day: nothing rings that day (--undo rings it again).")
        @Argument(help: "The day, like 2026-12-24.") var date: String
        @Flag(help: "Make the day an ordinary one again.") var undo = false
        func run() throws {
            guard let d = CivilDate(date) else {
                throw Console.fail(CoreError.badValue(option: "", reason: both("'\(date)' is not a date like 2026-12-24", "'\(date)' ist kein Datum wie 2026-12-24")))
            }
            let store = try openStore()
            do { try ScheduleCommand.service(store, start: false).setQuiet(d, !undo) } catch { throw Console.fail(error) }
            Console.out(undo ? (Language.current == .de ? "\(d) läutet wieder" : "\(d) rings again")
                             : (Language.current == .de ? "\(d) ist ein stiller Tag" : "\(d) is a quiet day"))
        }
    }

    struct Off: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "off", abstract: "Switch the whole schedule off: nothing rings until `schedule on`.")
        func run() throws { try ScheduleCommand.setOn(false) }
    }

    struct On: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "on", abstract: "Switch the schedule on again (from now on: nothing that passed rings late).")
        func run() throws { try ScheduleCommand.setOn(true) }
    }

    static func setOn(_ on: Bool) throws {
        let store = try openStore()
        do { try service(store, start: on).setOn(on) } catch { throw Console.fail(error) }
        Console.out(on ? tr("the schedule is on", "der Zeitplan ist an") : tr("the schedule is off: nothing rings until `schedule on`", "der Zeitplan ist aus: nichts läutet bis `schedule on`"))
    }

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "import", 
            abstract: "Add a whole timetable from a file.",
            discussion: "One entry a line, WHEN and ACTION as for `schedule add` (e.g. `daily 06:00 --preset morning --name \"Morning sit\"`); `#` starts a comment; blank lines are skipped. Every line is checked before any is added.")
        @Argument(help: "The timetable.", completion: .file()) var file: String
        @Flag(help: "Remove the present entries first (replace the timetable).") var replace = false

        func run() throws {
            var st = stat()
            guard stat(file, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size <= 1 << 20,
                  let data = FileManager.default.contents(atPath: file), let text = String(data: data, encoding: .utf8) else {
                throw Console.fail(CoreError.badValue(option: "", reason: both("\(file): not a readable text file of at most 1 MB",
                                                                           "\(file): keine lesbare Textdatei von höchstens 1 MB")))
            }
            let store = try openStore()
            // The file's syntax is the command line's (this target reads it); every rule is the service's.
            var lines: [(line: Int, entry: NewScheduleEntry)] = []
            // Lines end in LF, CR LF or CR ("\r\n" is one Character: splitting on "\n" read a
            // CR LF file as one line).
            for (n, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
                let line = String(raw).trimmingWhitespace()
                if line.isEmpty || line.hasPrefix("#") { continue }
                do {
                    lines.append((n + 1, try EntryOptions.parse(try ShellWords.split(line)).entry()))
                } catch let error as CoreError {
                    throw Console.fail(CoreError.badValue(option: "", reason: both("\(file) line \(n + 1): ", "\(file) Zeile \(n + 1): ") + error.description))
                } catch {
                    throw Console.fail(CoreError.badValue(option: "", reason: both("\(file) line \(n + 1): ", "\(file) Zeile \(n + 1): ")
                                                                  + String(EntryOptions.message(for: error).split(separator: "\n").first ?? "")))
                }
            }
            let enabled = lines.contains { $0.entry.enabled }
            let imported: ScheduleService.Imported
            do { imported = try ScheduleCommand.service(store, start: enabled).importTimetable(lines, replacing: replace) } catch {
                throw Console.fail(CoreError.badValue(option: "", reason: "\(file): " + error.words))
            }
            let n = imported.added
            Console.out(n == 1 ? tr("added 1 entry", "1 Eintrag hinzugefügt") : tr("added \(n) entries", "\(n) Einträge hinzugefügt"))
            let gone = imported.passedLines
            if !gone.isEmpty {
                let lines = gone.map(String.init).joined(separator: ", ")
                Console.err(gone.count == 1
                    ? tr("note: left out a one-off time that has passed (line \(lines))", "Hinweis: eine einmalige Zeit ausgelassen, die vorbei ist (Zeile \(lines))")
                    : tr("note: left out \(gone.count) one-off times that have passed (lines \(lines))",
                         "Hinweis: \(gone.count) einmalige Zeiten ausgelassen, die vorbei sind (Zeilen \(lines))"))
            }
            if enabled && n > 0 { ScheduleCommand.serviceHint() }
        }
    }

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "export", abstract: "Print the timetable in the format `schedule import` reads.")
        func run() throws {
            let store = try openStore()
            do { for line in try ScheduleService(store: store).export() { Console.out(line) } } catch { throw Console.fail(error) }
        }
    }

    struct RingNow: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "ring-now", abstract: "Run an entry now (through the daemon).")
        @Argument(help: "The entry's id.") var id: String
        func run() throws {
            guard let n = Int64(id) else {
                throw Console.fail(CoreError.badValue(option: "", reason: both("'\(id)' is not an entry's id", "'\(id)' ist keine Kennung eines Eintrags")))
            }
            Console.out(StatusText.summary(try control(.ringNow(id: n), start: true)))
        }
    }
}
