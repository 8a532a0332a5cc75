import ArgumentParser
import FoundationEssentials
import Glibc
import StillMomentCore

/// `history` and `stats`: the private practice log, in plain numbers.
struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "The practice log: every sit and guided meditation that was heard.",
        discussion: "Renders and previews are not practice and are not logged. CSV columns: \(PracticeExport.columns.joined(separator: ", ")).",
        subcommands: [List.self, Delete.self, Import.self],
        defaultSubcommand: List.self)

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the log (the default).")
        @Option(help: "From this day on (YYYY-MM-DD).") var since: String?
        @Option(help: "Up to this day (YYYY-MM-DD).") var until: String?
        @Option(help: "Only the last N entries.") var limit: Int?
        @Flag(help: "Print JSON.") var json = false
        @Flag(help: "Print CSV (RFC 4180, UTF-8).") var csv = false

        func run() throws {
            if json && csv { throw Console.fail(CoreError.badRequest(both("--json and --csv exclude each other", "--json und --csv schließen einander aus"))) }
            let since = try day(self.since, "--since"), until = try day(self.until, "--until")
            if let limit, limit < 1 || limit > 1_000_000 {
                throw Console.fail(CoreError.badValue(option: "--limit", reason: both("\(limit) is not from 1 to 1000000", "\(limit) liegt nicht zwischen 1 und 1000000")))
            }
            let store = try openStore()
            let log = PracticeLog(store: store)
            let de = Language.current == .de
            // Streamed: one row at a time from SQLite to standard output.
            var out = OutputBuffer()
            var count = 0
            do {
                if csv { out.add(PracticeExport.csvHeader) } else if json { out.add("[") }
                try log.forEach(since: since, until: until, limit: limit) { e in
                    if csv {
                        out.add(PracticeExport.csvLine(e))
                    } else if json {
                        out.add((count == 0 ? "" : ",") + Display.clean(jsonText(PracticeExport.json(e))))
                    } else {
                        let heard = TimeText.clock(e.heardMilliseconds), planned = TimeText.clock(e.plannedMilliseconds)
                        out.add(Display.cleanLines("\(e.id.prefix(8))  \(PracticeText.when(e.start))  \(heard) / \(planned)  \(PracticeText.reason(e.endReason))  \(e.name)\(e.teacher.map { " – \($0)" } ?? "")\(e.scheduled ? (de ? "  (geplant)" : "  (scheduled)") : "")") + "\n")
                    }
                    count += 1
                }
                if json { out.add("]\n") }
                out.flush()
            } catch {
                out.flush()
                throw Console.fail(error)
            }
            if count == 0 && !csv && !json {
                let empty: Bool
                do { empty = try log.isEmpty() } catch { throw Console.fail(error) }
                Console.out(empty || (since == nil && until == nil) ? tr("nothing in the practice log yet", "noch nichts im Übungsprotokoll")
                                                                    : PracticeText.nothingBetween(since, until))
            }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete a mistaken entry.")
        @Argument(help: "The entry's id (or a unique prefix, as `history` shows it).") var id: String

        func run() throws {
            let store = try openStore()
            do throws(CoreError) {
                let log = PracticeLog(store: store)
                let key = id.lowercased()
                let matches = try log.entries(idPrefix: key)
                guard matches.count == 1, !key.isEmpty, let entry = matches.first else {
                    throw matches.isEmpty ? CoreError.badValue(option: "", reason: both("no entry '\(id)' in the practice log", "kein Eintrag '\(id)' im Übungsprotokoll"))
                                          : CoreError.ambiguous(key: id, matches: matches.map { String($0.id.prefix(8)) })
                }
                _ = try log.delete(id: entry.id)
                Console.out((Language.current == .de ? "gelöscht: " : "deleted: ") + "\(PracticeText.when(entry.start))  \(entry.name)")
            } catch {
                throw Console.fail(error)
            }
        }
    }

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "import", abstract: "Take back a log exported with --csv or --json (no duplicates).")
        @Argument(help: "The exported file.", completion: .file(extensions: ["csv", "json"])) var file: String

        func run() throws {
            var st = stat()
            guard stat(file, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
                throw Console.fail(CoreError.badValue(option: "", reason: both("\(file): not a readable file", "\(file): keine lesbare Datei")))
            }
            guard st.st_size <= 64 << 20 else {
                throw Console.fail(CoreError.badValue(option: "", reason: both("\(file): larger than 64 MB; not a practice log",
                                                                           "\(file): größer als 64 MB; kein Übungsprotokoll")))
            }
            guard let data = FileManager.default.contents(atPath: file), let text = String(data: data, encoding: .utf8) else {
                throw Console.fail(CoreError.badValue(option: "", reason: both("\(file): not UTF-8 text", "\(file): kein UTF-8-Text")))
            }
            let entries: [PracticeEntry]
            do { entries = try PracticeExport.read(text) } catch {
                throw Console.fail(CoreError.badValue(option: "", reason: .same("\(file): \(error.description)")))
            }
            let store = try openStore()
            do {
                let added = try PracticeLog(store: store).add(entries)
                Console.out(Language.current == .de
                    ? "\(added) Einträge übernommen, \(entries.count - added) waren schon da"
                    : "imported \(added) entries; \(entries.count - added) were there already")
            } catch {
                throw Console.fail(error)
            }
        }
    }
}

struct StatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Time sat and number of sits: today, this week, month, year and in all.",
        discussion: "Plain numbers, no streaks and no badges.")
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let store = try openStore()
        let s: PracticeStats
        do { s = try PracticeLog(store: store).stats(today: LocalTime.now().date) } catch { throw Console.fail(error) }
        if json {
            Console.out(jsonText(s))
            return
        }
        let de = Language.current == .de
        func line(_ label: String, _ t: PracticeStats.Total) -> String {
            "\(label.padded(to: 14))\(PracticeText.duration(t.milliseconds).padded(to: 10)) \(t.sits) \(de ? (t.sits == 1 ? "Sitzung" : "Sitzungen") : (t.sits == 1 ? "sit" : "sits"))"
        }
        Console.out(line(de ? "heute" : "today", s.today))
        Console.out(line(de ? "diese Woche" : "this week", s.week))
        Console.out(line(de ? "dieser Monat" : "this month", s.month))
        Console.out(line(de ? "dieses Jahr" : "this year", s.year))
        Console.out(line(de ? "insgesamt" : "in all", s.all))
        Console.out("\((de ? "Durchschnitt" : "average").padded(to: 14))\(PracticeText.duration(s.averageMilliseconds))")
        Console.out("\((de ? "längste" : "longest").padded(to: 14))\(PracticeText.duration(s.longestMilliseconds))")
        let days = de ? ["Mo", "Di", "Mi", "Do", "Fr", "Sa", "So"] : ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
        Console.out((de ? "Minuten je Wochentag: " : "minutes per weekday: ")
            + zip(days, s.minutesByWeekday).map { "\($0) \($1)" }.joined(separator: "  "))
        for (title, table) in [(de ? "nach Vorlage" : "by preset", s.byPreset), (de ? "nach Lehrer:in" : "by teacher", s.byTeacher)]
        where !table.isEmpty {
            Console.out(title)
            for (name, t) in table.sorted(by: { $0.value.milliseconds > $1.value.milliseconds }) { Console.out("  " + line(name, t)) }
        }
    }
}

/// Dates and reasons in the user's language.
enum PracticeText {
    static func when(_ t: LocalTime, seconds: Bool = false) -> String { t.shown(seconds: seconds) }

    static func duration(_ ms: Int64) -> String {
        let minutes = ms / 60_000
        if minutes == 0 && ms > 0 { return "\(ms / 1000) s" }
        return minutes >= 60 ? "\(minutes / 60) h \(minutes % 60) min" : "\(minutes) min"
    }

    /// What `history` says when the log has entries but none in the range asked.
    static func nothingBetween(_ since: CivilDate?, _ until: CivilDate?) -> String {
        switch (since, until) {
        case let (s?, u?): tr("nothing in the practice log from \(s) to \(u)", "nichts im Übungsprotokoll vom \(s) bis \(u)")
        case let (s?, nil): tr("nothing in the practice log from \(s) on", "nichts im Übungsprotokoll ab \(s)")
        case let (nil, u?): tr("nothing in the practice log up to \(u)", "nichts im Übungsprotokoll bis \(u)")
        case (nil, nil): tr("nothing in the practice log yet", "noch nichts im Übungsprotokoll")
        }
    }

    static func reason(_ r: String) -> String {
        guard Language.current == .de else { return r }
        return ["completed": "beendet", "finished": "abgeschlossen", "stopped": "abgebrochen", "replaced": "ersetzt",
                "preempted": "unterbrochen", "failed": "fehlgeschlagen"][r] ?? r
    }
}

func day(_ text: String?, _ option: String) throws -> CivilDate? {
    guard let text else { return nil }
    guard let d = CivilDate(text) else {
        throw Console.fail(CoreError.badValue(option: option, reason: both("'\(text)' is not a date like 2026-11-24", "'\(text)' ist kein Datum wie 2026-11-24")))
    }
    return d
}

/// Encodes a value as one line of JSON (keys sorted).
func jsonText<T: Encodable>(_ value: T) -> String { JSON(encoding: value).line }
