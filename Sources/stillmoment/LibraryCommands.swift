import ArgumentParser
import FoundationEssentials
import Glibc
import StillMomentCore

/// Opens the store, printing a one-line error on failure.
func openStore() throws -> LibraryStore {
    // Past a file-size limit (ulimit -f) a write should fail with EFBIG, not kill us.
    signal(SIGXFSZ, SIG_IGN)
    let store: LibraryStore
    do { store = try LibraryStore() } catch { throw Console.fail(error) }
    for line in store.notes { Console.err(line) }
    return store
}

struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Copy guided meditations (MP3, M4A) into the library.",
        discussion: "The player only ever reads these copies: moving or deleting the originals breaks nothing."
    )

    @Argument(help: "The files to import.", completion: Complete.audioFiles)
    var files: [String]

    @Option(help: "The teacher (else the file's artist tag).")
    var teacher: String?

    @Option(help: "The name (only with one file; else the title tag, else the file name).")
    var name: String?

    @Flag(help: "Print the imported entries as JSON.")
    var json = false

    func run() throws {
        if name != nil && files.count != 1 {
            throw Console.fail(tr("--name can only be given with one file", "--name geht nur mit einer einzigen Datei"), code: Exit.usage)
        }
        let store = try openStore()
        let importer = Importer(store: store)
        var failed = 0
        var results: [Meditation] = []
        for file in files {
            let bar = ProgressBar(label: file, enabled: Console.isTerminal && !json)
            let raw = RawArgument(file)
            defer { raw?.close() }
            do {
                let outcome = try importer.importFile(
                    raw?.path ?? file, options: Importer.Options(teacher: teacher, name: name, sourceName: file),
                    progress: { bar.show($0) }, warn: { Console.warning($0) })
                bar.clear()
                switch outcome {
                case .imported(let m):
                    results.append(m)
                    if !json { Console.out(tr("imported \(file): \(describe(m)) [\(m.id.prefix(8))]",
                                              "importiert: \(file): \(describe(m)) [\(m.id.prefix(8))]")) }
                case .alreadyThere(let m):
                    results.append(m)
                    if !json { Console.out(tr("already in the library: \(file) is \(describe(m)) [\(m.id.prefix(8))]",
                                              "schon in der Bibliothek: \(file) ist \(describe(m)) [\(m.id.prefix(8))]")) }
                case .replacedDamagedCopy(let m):
                    results.append(m)
                    if !json { Console.out(tr("replaced the damaged stored copy of \(describe(m)) with \(file) [\(m.id.prefix(8))]",
                                              "die beschädigte gespeicherte Kopie von \(describe(m)) durch \(file) ersetzt [\(m.id.prefix(8))]")) }
                }
            } catch {
                bar.clear()
                failed += 1
                Console.error(Console.text(error))
            }
        }
        if json { Console.out(jsonText(.array(results.map(entryJSON)))) }
        if failed > 0 { throw ExitCode(Exit.failure) }
    }
}

func describe(_ m: Meditation) -> String {
    let who = m.teacher.isEmpty ? "" : "\(m.teacher) – "
    return "\(who)\(m.name) (\(TimeText.clock(m.durationMilliseconds)))"
}

/// The JSON object of a meditation (`list --json`, `import --json`, `show --json`): the one
/// representation every front-end gives (`MeditationRecord`: times in ms).
func entryJSON(_ m: Meditation) -> JSONValue { JSONValue(encoding: MeditationRecord(m)) }

struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the library, grouped by teacher.")

    @Option(help: "Only entries whose teacher, name or album contains TEXT.")
    var search: String?

    @Option(name: .customLong("max-duration"), help: "Only entries up to this long (e.g. 15m).")
    var maxDuration: String?

    @Flag(help: "Print a JSON array.")
    var json = false

    func run() throws {
        let store = try openStore()
        var items: [Meditation]
        do {
            let rows = try store.catalogRows()
            items = rows.meditations
            if !rows.damaged.isEmpty {
                let n = rows.damaged.count
                Console.warning(n == 1
                    ? tr("1 catalog entry is damaged and not listed; `stillmoment library verify --repair` rebuilds them from their files",
                         "1 Eintrag im Katalog ist beschädigt und fehlt in der Liste; `stillmoment library verify --repair` baut ihn aus seiner Datei neu auf")
                    : tr("\(n) catalog entries are damaged and not listed; `stillmoment library verify --repair` rebuilds them from their files",
                         "\(n) Einträge im Katalog sind beschädigt und fehlen in der Liste; `stillmoment library verify --repair` baut sie aus ihren Dateien neu auf"))
            }
        } catch { throw Console.fail(error) }
        if let search {
            let s = search.lowercased()
            items = items.filter { [$0.teacher, $0.name, $0.album ?? ""].contains { $0.lowercased().contains(s) } }
        }
        if let maxDuration {
            let limit: Int64
            do { limit = try TimeText.parse(maxDuration) } catch { throw Console.fail("--max-duration: \(error.description)", code: Exit.usage) }
            items = items.filter { $0.durationMilliseconds <= limit }
        }
        items.sort {
            let a = ($0.teacher.lowercased(), $0.name.lowercased()), b = ($1.teacher.lowercased(), $1.name.lowercased())
            return a < b
        }
        if json {
            Console.out(jsonText(.array(items.map(entryJSON))))
            return
        }
        if items.isEmpty && ((try? SyncService(store: store).arriving().isEmpty) ?? true) {
            if search != nil || maxDuration != nil {
                let en = "nothing in the library matches" + (search.map { " '\($0)'" } ?? "") + (maxDuration.map { " up to \($0)" } ?? "")
                let de = "keine Meditation in der Bibliothek" + (search.map { " passt zu '\($0)'" } ?? "")
                    + (maxDuration.map { (search == nil ? "" : " und") + " dauert höchstens \($0)" } ?? "")
                Console.out(tr(en, de))
            } else {
                Console.out(tr("the library is empty (add meditations with `stillmoment import FILE`)",
                               "die Bibliothek ist leer (füge Meditationen mit `stillmoment import DATEI` hinzu)"))
            }
            return
        }
        var teacher: String?
        for m in items {
            if m.teacher.lowercased() != teacher?.lowercased() {
                teacher = m.teacher
                Console.out(m.teacher.isEmpty ? tr("(no teacher)", "(ohne Lehrer:in)") : m.teacher)
            }
            Console.out("  \(m.id.prefix(8))  \(TimeText.clock(m.durationMilliseconds).padded(to: 8)) \(m.name)")
        }
        // Synced from another device, their files not here (yet): listed, not playable.
        let arriving = ((try? SyncService(store: store).arriving()) ?? []).filter { a in
            search.map { s in [a.teacher, a.name].contains { $0.lowercased().contains(s.lowercased()) } } ?? true
        }
        if !arriving.isEmpty {
            Console.out(tr("(arriving from the sync hub)", "(unterwegs vom Sync-Hub)"))
            for a in arriving {
                let state = a.fetched ? tr("arriving, \(a.have / 1_000_000) of \(a.size / 1_000_000) MB", "unterwegs, \(a.have / 1_000_000) von \(a.size / 1_000_000) MB")
                                      : tr("on the hub only", "nur auf dem Hub")
                Console.out("  \(a.id.prefix(8))  \(TimeText.clock(a.duration).padded(to: 8)) \(Display.clean(a.name))  (\(state))")
            }
        }
    }
}

struct ShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show one meditation.")
    @Argument(help: "A UUID, a unique prefix of one, or the exact name.", completion: Complete.meditations) var id: String
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let store = try openStore()
        let m: Meditation
        do { m = try store.find(id) } catch { throw Console.fail(error) }
        if json {
            Console.out(jsonText(entryJSON(m)))
            return
        }
        let off = tr("off", "aus")
        let rows: [(String, String)] = [
            (tr("id", "Kennung"), m.id), (tr("name", "Name"), m.name), (tr("teacher", "Lehrer:in"), m.teacher), (tr("album", "Album"), m.album ?? "-"),
            (tr("duration", "Dauer"), TimeText.clock(m.durationMilliseconds)), (tr("trim", "Zuschnitt"), trimText(m)),
            (tr("start gong", "Startgong"), m.startGong ?? off), (tr("end gong", "Schlussgong"), m.endGong ?? off),
            (tr("loudness gain", "Lautheitsausgleich"), decibels(m.loudnessGain)),
            (tr("last position", "zuletzt bei"), m.lastPosition.map(TimeText.clock) ?? "-"),
            (tr("file", "Datei"), store.path(of: m)), (tr("size", "Größe"), tr("\(m.size) bytes", "\(m.size) Bytes")),
            (tr("imported from", "importiert aus"), m.originalName),
            (tr("added", "hinzugefügt"), ISO8601.format(m.dateAdded)),
        ]
        let width = max(15, (rows.map(\.0.count).max() ?? 0) + 2)
        for (k, v) in rows { Console.out("\(k.padded(to: width))\(v)") }
    }
}

func trimText(_ m: Meditation) -> String {
    if m.trimStart == nil && m.trimEnd == nil { return tr("none", "keiner") }
    return "\(TimeText.clock(m.trimStart ?? 0)) – \(TimeText.clock(m.trimEnd ?? m.durationMilliseconds))"
}

struct EditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "edit", abstract: "Change a meditation's details.")
    @Argument(help: "A UUID, a unique prefix of one, or the exact name.", completion: Complete.meditations) var id: String
    @Option var teacher: String?
    @Option var name: String?
    @Option(help: "The album, or off.") var album: String?
    @Option(name: .customLong("trim-start"), help: "Start playing here (e.g. 0:30), or off.") var trimStart: String?
    @Option(name: .customLong("trim-end"), help: "Stop playing here (e.g. 24:10), or off.") var trimEnd: String?
    @Option(name: .customLong("start-gong"), help: "A gong before the meditation, or off.", completion: Complete.gongs) var startGong: String?
    @Option(name: .customLong("end-gong"), help: "A gong after the meditation, or off.", completion: Complete.gongs) var endGong: String?

    func run() throws {
        let store = try openStore()
        do throws(CoreError) {
            var edit = MeditationEdit(name: name, teacher: teacher, album: album)
            func time(_ text: String?, _ option: String) throws(CoreError) -> FieldChange<Int64>? {
                guard let text else { return nil }
                if text.lowercased() == "off" { return .clear }
                do { return .set(try TimeText.parse(text)) } catch { throw CoreError.badValue(option: option, reason: .rendering { error.description }) }
            }
            func gong(_ text: String?) -> FieldChange<String>? { text.map { $0.lowercased() == "off" ? .clear : .set($0) } }
            edit.trimStart = try time(trimStart, "--trim-start")
            edit.trimEnd = try time(trimEnd, "--trim-end")
            edit.startGong = gong(startGong)
            edit.endGong = gong(endGong)
            let m = try LibraryService(store: store).edit(id, edit)
            Console.out("\(describe(m)) [\(m.id.prefix(8))]")
        } catch {
            throw Console.fail(Self.flagNames(error))
        }
    }

    /// The service names the fields as every front-end does; here they are options.
    static func flagNames(_ error: CoreError) -> CoreError {
        guard case .badValue(let field, let reason) = error, MeditationEdit.fields.contains(field) else { return error }
        let flag = "--" + field.reduce(into: "") { out, ch in
            if ch.isUppercase { out += "-" + ch.lowercased() } else { out.append(ch) }
        }
        return .badValue(option: flag, reason: reason)
    }
}

struct DeleteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Remove a meditation and its stored file.")
    @Argument(help: "A UUID, a unique prefix of one, or the exact name.", completion: Complete.meditations) var id: String
    @Flag(help: "Delete it even when schedule entries play it (they then show as broken).") var force = false

    func run() throws {
        let store = try openStore()
        do {
            let m = try store.find(id)
            let force = self.force
            try Console.deleteAsking { (asked) throws(CoreError) in try store.delete(m, force: force || asked) }
            Console.out(tr("deleted \(describe(m)); \(megabytes(m.size)) freed", "gelöscht: \(describe(m)); \(megabytes(m.size)) frei geworden"))
        } catch {
            throw Console.fail(error)
        }
    }
}

struct LibraryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "library", abstract: "Space used, and a check of the store.",
        subcommands: [Usage.self, Verify.self])

    struct Usage: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "usage", abstract: "Space used in total and per teacher, and free space.")
        func run() throws {
            let store = try openStore()
            let items: [Meditation]
            do { items = try store.all() } catch { throw Console.fail(error) }
            let total = items.reduce(Int64(0)) { $0 + $1.size }
            let n = items.count
            Console.out(tr("total", "gesamt").padded(to: 13) + (n == 1 ? tr("\(mb(total)) in 1 meditation", "\(mb(total)) in 1 Meditation")
                                                                  : tr("\(mb(total)) in \(n) meditations", "\(mb(total)) in \(n) Meditationen")))
            for (teacher, group) in Dictionary(grouping: items, by: { $0.teacher }).sorted(by: { $0.key.lowercased() < $1.key.lowercased() }) {
                Console.out("  \((teacher.isEmpty ? tr("(no teacher)", "(ohne Lehrer:in)") : teacher).padded(to: 24)) \(mb(group.reduce(0) { $0 + $1.size }))")
            }
            Console.out(tr("free", "frei").padded(to: 13) + "\(mb(store.freeBytes())) (\(store.home))")
        }
        func mb(_ b: Int64) -> String { megabytes(b) }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "verify", abstract: "Check every entry's file (exists, size, hash), damaged entries, and files without an entry.")
        @Flag(help: "Put it right without deleting anything: adopt stored files that have no entry (or move unreadable ones to Lost+Found/), rebuild damaged entries, remove entries whose file is gone.") var repair = false
        func run() throws {
            let store = try openStore()
            do {
                let problems = try store.verify()
                if repair {
                    let done = try store.repair()
                    for line in done { Console.out(line) }
                    let left = try store.verify()
                    for p in left { Console.out(tr("still: ", "weiterhin: ") + p.description) }
                    if !left.isEmpty { throw ExitCode(Exit.failure) }
                    if done.isEmpty {
                        let n = try store.all().count
                        Console.out(tr("nothing to repair (\(n) entries)", "nichts zu reparieren (\(n) Einträge)"))
                    }
                    return
                }
                for p in problems { Console.out(p.description) }
                if problems.isEmpty {
                    let n = try store.all().count
                    Console.out(tr("the library is consistent (\(n) entries)", "die Bibliothek ist in Ordnung (\(n) Einträge)"))
                } else {
                    throw ExitCode(Exit.failure)
                }
            } catch let error as CoreError {
                throw Console.fail(error)
            }
        }
    }
}

/// A one-line progress bar on a terminal (nothing otherwise).
final class ProgressBar {
    let label: String
    let enabled: Bool
    init(label: String, enabled: Bool) {
        self.label = label
        self.enabled = enabled
    }
    func show(_ fraction: Double) {
        guard enabled else { return }
        let width = 30
        let filled = Int(fraction * Double(width))
        var s = "\r\u{1B}[2K\(Display.clean(String(label.suffix(40)))) [" + String(repeating: "#", count: filled)
            + String(repeating: " ", count: width - filled) + "] \(Int(fraction * 100))%"
        s.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
    }
    func clear() {
        guard enabled else { return }
        var s = "\r\u{1B}[2K"
        s.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
    }
}

/// A command-line argument whose bytes are not UTF-8 (a file name from another system):
/// Swift's arguments carry it repaired, so it is opened from the raw bytes and reached
/// as /proc/self/fd/N.
struct RawArgument {
    let fd: Int32
    var path: String { "/proc/self/fd/\(fd)" }

    init?(_ argument: String) {
        let argv = CommandLine.unsafeArgv
        for i in 1..<Int(CommandLine.argc) {
            guard let raw = argv[i] else { continue }
            let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(raw).assumingMemoryBound(to: UInt8.self), count: strlen(raw))
            guard String(validating: bytes, as: UTF8.self) == nil,
                  String(decoding: bytes, as: UTF8.self) == argument else { continue }
            let fd = open(raw, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            self.fd = fd
            return
        }
        return nil
    }

    func close() { _ = Glibc.close(fd) }
}
