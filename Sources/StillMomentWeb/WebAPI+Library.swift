// The web app's library, timer choices, practice log and schedule routes: read from and
// written to the store with the same checks as the CLI's commands.
import FoundationEssentials
import StillMomentControl
import StillMomentCore

extension WebAPI {
    private func failure(_ error: CoreError) -> Response {
        switch error.category {
        case .badInput:
            if case .notFound = error { return .error(404, "not-found", error.description) }
            if case .inUse = error { return .error(409, "in-use", error.description) }
            return .error(422, "bad-arguments", error.description)
        default:
            if case .noSpace = error { return .error(507, "no-space", error.description) }
            return .error(500, "failed", error.description)
        }
    }

    static func meditationJSON(_ m: Meditation) -> JSON {
        var o: [String: JSON] = [
            "id": .string(m.id), "name": .string(m.name), "teacher": .string(m.teacher),
            "duration": .number(Double(m.durationMilliseconds)), "file": .string(m.originalName),
            "added": .number((m.dateAdded.timeIntervalSince1970 * 1000).rounded()),
        ]
        if let a = m.album { o["album"] = .string(a) }
        if let v = m.trimStart { o["trimStart"] = .number(Double(v)) }
        if let v = m.trimEnd { o["trimEnd"] = .number(Double(v)) }
        if let v = m.startGong { o["startGong"] = .string(v) }
        if let v = m.endGong { o["endGong"] = .string(v) }
        if let v = m.lastPosition { o["lastPosition"] = .number(Double(v)) }
        return .object(o)
    }

    func meditations() -> Response {
        do throws(CoreError) {
            let all = try store.all().sorted { ($0.teacher.lowercased(), $0.name.lowercased()) < ($1.teacher.lowercased(), $1.name.lowercased()) }
            return .json(.object(["meditations": .array(all.map(Self.meditationJSON))]))
        } catch {
            return failure(error)
        }
    }

    /// Sets a meditation's name, teacher, album, gongs and trim (null: off).
    func edit(_ id: String, _ args: [String: JSON]) -> Response {
        do throws(CoreError) {
            var m = try store.find(id)
            guard m.id == id else { throw CoreError.notFound(key: Display.clean(id), hint: "") }
            let catalog = try SoundCatalog.withCustomSounds(store: store)
            for (key, value) in args {
                switch (key, value) {
                case ("name", .string(let s)), ("teacher", .string(let s)), ("album", .string(let s)):
                    let field = Meditation.TextField(rawValue: key) ?? .album
                    let t = try Meditation.checked(s, field)
                    switch field {
                    case .name: m.name = t ?? m.name
                    case .teacher: m.teacher = t ?? m.teacher
                    case .album: m.album = t
                    }
                case ("startGong", .null), ("endGong", .null):
                    if key == "startGong" { m.startGong = nil } else { m.endGong = nil }
                case ("startGong", .string(let s)), ("endGong", .string(let s)):
                    let gong = s == "off" ? nil : try catalog.gong(s).id
                    if key == "startGong" { m.startGong = gong } else { m.endGong = gong }
                case ("trimStart", .null): m.trimStart = nil
                case ("trimEnd", .null): m.trimEnd = nil
                case ("trimStart", .number(let n)), ("trimEnd", .number(let n)):
                    guard n.isFinite, n >= 0, n <= Double(m.durationMilliseconds) else {
                        throw CoreError.badValue(option: key, reason: tr("outside the meditation (0 to \(TimeText.clock(m.durationMilliseconds)))",
                                                                          "außerhalb der Meditation (0 bis \(TimeText.clock(m.durationMilliseconds)))"))
                    }
                    if key == "trimStart" { m.trimStart = Int64(n) } else { m.trimEnd = Int64(n) }
                default:
                    throw CoreError.badValue(option: "", reason: tr("unknown or malformed field '\(Display.clean(String(key.prefix(40))))'; the fields are: name, teacher, album, startGong, endGong, trimStart, trimEnd",
                                                                    "unbekanntes oder falsches Feld '\(Display.clean(String(key.prefix(40))))'; die Felder sind: name, teacher, album, startGong, endGong, trimStart, trimEnd"))
                }
            }
            if (m.trimStart ?? 0) >= (m.trimEnd ?? m.durationMilliseconds) {
                throw CoreError.badRequest(tr("the trim range is empty", "der Zuschnitt ist leer"))
            }
            try store.update(m)
            return .json(Self.meditationJSON(m))
        } catch {
            return failure(error)
        }
    }

    /// Deletes a meditation; one that schedule entries play only with `force` (409 `in-use`
    /// otherwise, naming them: the page asks and sends force).
    func delete(_ id: String, force: Bool) -> Response {
        do throws(CoreError) {
            let m = try store.find(id)
            guard m.id == id else { throw CoreError.notFound(key: Display.clean(id), hint: "") }
            try store.delete(m, force: force)
            log.notice("deleted meditation \(m.id) (\(Display.clean(m.name)))")
            return .json(.object(["deleted": .string(m.id)]))
        } catch {
            return failure(error)
        }
    }

    /// The import of a finished upload: the CLI's importer (atomic, duplicates found by
    /// content) in a child process, `stillmoment web import-upload`, so the decoders and the
    /// analysis' buffers never live in the web app (its RSS stays small; a file that
    /// crashes a decoder crashes the child only).
    func importJob(_ upload: Upload) -> @Sendable () -> Response {
        upload.finish()
        let log = self.log
        return {
            defer { upload.discard() }
            let response = ImportChild.run(path: upload.path, name: upload.name)
            log.notice("upload \(upload.name): \(response.status) \(String(decoding: response.body.prefix(200), as: UTF8.self))")
            return response
        }
    }

    /// The import itself (in the child): the answer the browser gets.
    public static func importFile(store: LibraryStore, path: String, name: String) -> Response {
        do throws(CoreError) {
            let outcome = try Importer(store: store).importFile(path, options: .init(sourceName: name))
            let (kind, m): (String, Meditation)
            switch outcome {
            case .imported(let x): (kind, m) = ("imported", x)
            case .alreadyThere(let x): (kind, m) = ("duplicate", x)
            case .replacedDamagedCopy(let x): (kind, m) = ("replaced", x)
            }
            return .json(.object(["outcome": .string(kind), "meditation": meditationJSON(m)]))
        } catch {
            switch error {
            case .unplayable: return .error(415, "unplayable", error.description)
            case .noSpace: return .error(507, "no-space", error.description)
            default: return .error(500, "failed", error.description)
            }
        }
    }

    /// What the timer form offers: the sounds, the defaults (settings) and the presets.
    func options() -> Response {
        do throws(CoreError) {
            let catalog = try SoundCatalog.withCustomSounds(store: store)
            var sounds: [String: [JSON]] = ["gong": [], "interval": [], "ambience": []]
            for s in catalog.sounds {
                sounds[s.kind.rawValue, default: []].append(.object(["id": .string(s.id), "name": .string(s.name.text())]))
            }
            let settings = (try? Settings.load()) ?? Settings()
            var defaults: [String: JSON] = [:]
            for key in Settings.keys where key != "device" && !Settings.nonTimerKeys.contains(key) { defaults[key] = .string(settings.value(key)) }
            let presets = try PresetStore(store: store).all().map { p -> JSON in
                .object(["name": .string(p.name), "summary": .string(ScheduleAction.optionText(p.request))])
            }
            return .json(.object(["sounds": .object(sounds.mapValues(JSON.array)), "defaults": .object(defaults), "presets": .array(presets)]))
        } catch {
            return failure(error)
        }
    }

    func practice() -> Response {
        do throws(CoreError) {
            let log = PracticeLog(store: store)
            // The same Core calls as `stats` and `history --limit 50`: SQL pages and totals.
            let stats = try log.stats(today: LocalTime.now().date)
            let recent = try log.entries(limit: 50).reversed().map { e -> JSON in
                var o: [String: JSON] = ["id": .string(e.id), "kind": .string(e.kind.rawValue), "name": .string(e.name),
                                         "start": .string(e.start.iso8601), "plannedMilliseconds": .number(Double(e.plannedMilliseconds)),
                                         "heardMilliseconds": .number(Double(e.heardMilliseconds)), "endReason": .string(e.endReason),
                                         "scheduled": .bool(e.scheduled)]
                if let t = e.teacher { o["teacher"] = .string(t) }
                if let p = e.preset { o["preset"] = .string(p) }
                return .object(o)
            }
            return .json(.object(["entries": .array(recent), "stats": JSON(encoding: stats)]))
        } catch {
            return failure(error)
        }
    }

    func schedules() -> Response {
        do throws(CoreError) {
            let schedules = ScheduleStore(store: store)
            let quiet = try schedules.quietDays()
            let zone = ZoneRules.system(), now = LocalTime.now().unix
            let items = try schedules.all().map { e -> JSON in
                let next = e.enabled ? e.when.next(after: max(now, e.lastHandled), zone: zone, seed: e.seed, quiet: quiet) : nil
                var o: [String: JSON] = ["id": .number(Double(e.id)), "when": .string(e.when.description),
                                         "action": .string(e.action.description), "enabled": .bool(e.enabled)]
                if let n = e.name { o["name"] = .string(n) }
                if let next { o["next"] = .string(zone.localTime(next).iso8601) }
                return .object(o)
            }
            return .json(.object(["schedules": .array(items)]))
        } catch {
            return failure(error)
        }
    }

    func setSchedule(_ id: String, _ args: [String: JSON]) -> Response {
        guard let n = Int64(id) else { return .error(404, "not-found", tr("no entry \(Display.clean(String(id.prefix(20))))", "kein Eintrag \(Display.clean(String(id.prefix(20))))")) }
        guard args.count == 1, case .bool(let enabled)? = args["enabled"] else {
            return .error(422, "bad-arguments", tr("an entry takes {\"enabled\": true|false}", "ein Eintrag nimmt {\"enabled\": true|false}"))
        }
        do throws(CoreError) {
            let table = ScheduleStore(store: store)
            guard try table.find(n) != nil else { throw CoreError.notFound(key: id, hint: "") }
            try table.setEnabled(n, enabled, now: LocalTime.now().unix)
            _ = control(.reschedule, [:], start: false)
            return schedules()
        } catch {
            return failure(error)
        }
    }
}
