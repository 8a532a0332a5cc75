/// The schedule as every front-end changes and shows it: adding (bound and checked, a
/// one-off time that has passed refused), importing a timetable (one transaction), the
/// listing with each entry's next time and last outcome, enabling, removing, quiet days,
/// and the main switch (all off, then on again from that moment).
/// Each change tells the daemon (`changed`, given by the front-end that can reach it); the
/// daemon also notices any change by the timetable's counter, within 2 s.
import FoundationEssentials

/// An entry as every listing shows it (`schedule list --json`, the web app).
public struct ScheduleListing: Sendable, Equatable, Codable {
    public var id: Int64
    public var name: String?
    public var when: String
    public var action: String
    public var enabled: Bool
    /// The next time it rings (ISO 8601 with the local offset), nil when it does not.
    public var next: String?
    /// When it last rang or was missed, and what happened.
    public var last: String?
    public var lastOutcome: String?
    /// Why it cannot ring (its preset or meditation was deleted).
    public var broken: String?
    /// A bell for several rooms: which (`all` or `hall,garden`), and the node it came from
    /// when another node made it.
    public var rooms: String?
    public var from: String?
    /// The sync devices it runs on (nil: all), and whether that is not this one.
    public var devices: String?
    public var elsewhere: Bool?
}

public struct ScheduleService: Sendable {
    public let store: LibraryStore
    public let table: ScheduleStore
    /// Told after each change (the CLI and the web app tell the daemon).
    public let changed: @Sendable () -> Void
    public let zone: ZoneRules

    public init(store: LibraryStore, zone: ZoneRules = .system(), changed: @escaping @Sendable () -> Void = {}) {
        self.store = store
        table = ScheduleStore(store: store)
        self.zone = zone
        self.changed = changed
    }

    /// Adds an entry as typed: its preset and meditation bound, its action checked, a
    /// one-off time that has passed refused (it would never ring).
    public func add(_ typed: NewScheduleEntry, now: Int64 = LocalTime.now().unix) throws(CoreError) -> ScheduleEntry {
        var entry = typed
        entry.action = try table.bind(entry.action)
        guard !entry.when.hasPassed(now: now, zone: zone) else { throw passed(entry.when, now: now) }
        guard let id = try table.add([entry], replacing: false, now: now).first, let added = try table.find(id) else {
            throw CoreError.io(path: store.databasePath, reason: .same("the entry was not saved"))
        }
        changed()
        return added
    }

    /// What an import did: the entries added, and the lines left out as passed.
    public struct Imported: Sendable, Equatable {
        public var added: Int
        public var passedLines: [Int]
    }

    /// Imports a timetable's entries (with their line numbers), all or nothing: each line
    /// checked as a timetable line (no device) and bound; one-off times that have passed
    /// left out and named; then one transaction, every limit first.
    public func importTimetable(_ lines: [(line: Int, entry: NewScheduleEntry)], replacing: Bool,
                                now: Int64 = LocalTime.now().unix) throws(CoreError) -> Imported {
        var keep: [NewScheduleEntry] = [], gone: [Int] = []
        let catalog = try SoundCatalog.withCustomSounds(store: store), settings = try Settings.load()
        for (n, typed) in lines {
            do throws(CoreError) {
                var entry = typed
                try entry.checkForTimetable()
                entry.action = try table.bind(entry.action, catalog: catalog, settings: settings)
                if entry.when.hasPassed(now: now, zone: zone) { gone.append(n) } else { keep.append(entry) }
            } catch {
                throw CoreError.badValue(option: "", reason: both("line \(n): ", "Zeile \(n): ") + error.description)
            }
        }
        try table.add(keep, replacing: replacing, now: now)
        changed()
        return Imported(added: keep.count, passedLines: gone)
    }

    /// The timetable file: a header, then each entry as a line `importTimetable` reads back
    /// to the same entry (a device and a broken reference as comments).
    public func export() throws(CoreError) -> [String] {
        var out = [tr("# stillmoment schedule: WHEN ACTION [--name NAME], one entry a line",
                      "# stillmoment-Zeitplan: WANN AKTION [--name NAME], ein Eintrag je Zeile")]
        for e in try table.all() {
            // Another node's entry for rooms is that node's to export (this one keeps a copy).
            if let origin = e.origin {
                out.append(tr("# entry \(e.id) is \(origin)'s, for rooms \(e.rooms?.description ?? "")", "# Eintrag \(e.id) gehört \(origin), für Räume \(e.rooms?.description ?? "")"))
                continue
            }
            if case .timer(_, let request) = e.action, let device = request.device {
                out.append(tr("# entry \(e.id) plays on \(device); a timetable file does not choose the device (name a preset that does)",
                              "# Eintrag \(e.id) spielt auf \(device); eine Zeitplandatei wählt kein Gerät (nenne eine Vorlage, die es tut)"))
            }
            if let problem = e.problem { out.append(tr("# entry \(e.id) is broken: \(problem.text(.en))", "# Eintrag \(e.id) ist kaputt: \(problem.text(.de))")) }
            out.append(e.line)
        }
        return out
    }

    /// Every entry with its next time and last outcome, and the quiet days. While the
    /// schedule is off, no entry has a next time.
    public func listing(now: Int64 = LocalTime.now().unix) throws(CoreError) -> (entries: [ScheduleListing], quietDays: [CivilDate]) {
        let quiet = try table.quietDays()
        let off = try table.offSince() != nil
        let entries = try table.all().map { e -> ScheduleListing in
            let next = e.enabled && !off && !e.elsewhere ? e.when.next(after: max(now, e.lastHandled), zone: zone, seed: e.seed, quiet: quiet) : nil
            let last = (try? table.events(entry: e.id, limit: 1))?.first
            return ScheduleListing(id: e.id, name: e.name, when: e.when.description, action: e.action.description, enabled: e.enabled,
                                   next: next.map { zone.localTime($0).iso8601 }, last: last.map { zone.localTime($0.at).iso8601 },
                                   lastOutcome: last.map { $0.outcome.rawValue + ($0.detail.map { ": \($0)" } ?? "") },
                                   broken: e.problem?.text(), rooms: e.rooms?.description, from: e.origin,
                                   devices: e.devices?.joined(separator: ","), elsewhere: e.elsewhere ? true : nil)
        }
        return (entries, quiet.sorted())
    }

    /// What rings from `start` to `end` (unix seconds), at most `count` items, in order: a dry run.
    public func upcoming(from start: Int64, until end: Int64, count: Int) throws(CoreError) -> [(at: Int64, entry: ScheduleEntry)] {
        let quiet = try table.quietDays()
        var items: [(at: Int64, entry: ScheduleEntry)] = []
        guard try table.offSince() == nil else { return [] }
        for e in try table.all() where e.enabled && e.problem == nil && !e.elsewhere {
            for t in e.when.occurrences(after: max(start - 1, e.lastHandled), until: end, zone: zone, seed: e.seed, quiet: quiet, limit: count) {
                items.append((t, e))
            }
        }
        items.sort { ($0.at, $0.entry.id) < ($1.at, $1.entry.id) }
        return Array(items.prefix(count))
    }

    /// Switches an entry on (from now on: nothing missed meanwhile rings late) or off.
    @discardableResult
    public func setEnabled(_ key: String, _ enabled: Bool, now: Int64 = LocalTime.now().unix) throws(CoreError) -> ScheduleEntry {
        let e = try table.require(key)
        try table.setEnabled(e.id, enabled, now: now)
        changed()
        return e
    }

    @discardableResult
    public func remove(_ key: String) throws(CoreError) -> ScheduleEntry {
        let e = try table.require(key)
        try table.remove(e.id)
        changed()
        return e
    }

    /// A quiet day (nothing rings), or an ordinary one again.
    public func setQuiet(_ day: CivilDate, _ quiet: Bool) throws(CoreError) {
        if quiet { try table.skip(day) } else { try table.unskip(day) }
        changed()
    }

    /// The main switch: off, nothing rings; on again, from now on (nothing that passed while
    /// it was off rings late). Each entry keeps its own on/off.
    public func setOn(_ on: Bool, now: Int64 = LocalTime.now().unix) throws(CoreError) {
        try table.setOn(on, now: now)
        changed()
    }

    /// Since when the schedule is off (unix seconds), nil while it is on.
    public func offSince() throws(CoreError) -> Int64? { try table.offSince() }

    /// A one-off time that has passed: it would never ring.
    public func passed(_ when: ScheduleWhen, now: Int64) -> CoreError {
        let clock = zone.localTime(now).shown(seconds: true)
        return CoreError.badValue(option: "WHEN", reason: both("'\(when)' has passed (it is \(clock) now)", "'\(when)' ist vorbei (jetzt ist \(clock))"))
    }
}
