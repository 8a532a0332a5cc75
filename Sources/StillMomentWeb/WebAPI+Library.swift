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

    /// A meditation as every front-end shows it (`MeditationRecord`).
    static func meditationJSON(_ m: Meditation) -> JSON { JSON(encoding: MeditationRecord(m)) }

    func meditations() -> Response {
        do throws(CoreError) {
            let all = try store.all().sorted { ($0.teacher.lowercased(), $0.name.lowercased()) < ($1.teacher.lowercased(), $1.name.lowercased()) }
            // Synced from another device, their files not here (yet): listed, not playable.
            let arriving = ((try? SyncService(store: store).arriving()) ?? []).map { a -> JSON in
                .object(["id": .string(a.id), "name": .string(a.name), "teacher": .string(a.teacher), "duration": .number(Double(a.duration)),
                         "bytes": .number(Double(a.size)), "have": .number(Double(a.have)), "fetched": .bool(a.fetched)])
            }
            return .json(.object(["meditations": .array(all.map(Self.meditationJSON)), "arriving": .array(arriving)]))
        } catch {
            return failure(error)
        }
    }

    /// Sets a meditation's name, teacher, album, gongs and trim (null or "off": off), by the
    /// library's one typed edit: this only reads the JSON into it.
    func edit(_ id: String, _ args: [String: JSON]) -> Response {
        do throws(CoreError) {
            let m = try store.find(id)
            guard m.id == id else { throw CoreError.notFound(key: Display.clean(id), hint: .same("")) }
            var edit = MeditationEdit()
            for (key, value) in args {
                switch (key, value) {
                case ("name", .string(let s)): edit.name = s
                case ("teacher", .string(let s)): edit.teacher = s
                case ("album", .string(let s)): edit.album = s
                case ("album", .null): edit.album = ""
                case ("startGong", .null), ("startGong", .string("off")): edit.startGong = .clear
                case ("endGong", .null), ("endGong", .string("off")): edit.endGong = .clear
                case ("startGong", .string(let s)): edit.startGong = .set(s)
                case ("endGong", .string(let s)): edit.endGong = .set(s)
                case ("trimStart", .null): edit.trimStart = .clear
                case ("trimEnd", .null): edit.trimEnd = .clear
                case ("trimStart", .number(let n)), ("trimEnd", .number(let n)):
                    // A time within ±1000 h (what the library takes) as whole ms; anything else is refused by the edit.
                    guard n.isFinite, abs(n) <= Double(Meditation.maxMilliseconds) else {
                        throw CoreError.badValue(option: key, reason: both("not a time in ms", "keine Zeit in ms"))
                    }
                    if key == "trimStart" { edit.trimStart = .set(Int64(n)) } else { edit.trimEnd = .set(Int64(n)) }
                default:
                    let fields = MeditationEdit.fields.joined(separator: ", ")
                    throw CoreError.badValue(option: "", reason: both("unknown or malformed field '\(Display.clean(String(key.prefix(40))))'; the fields are: \(fields)",
                                                                    "unbekanntes oder falsches Feld '\(Display.clean(String(key.prefix(40))))'; die Felder sind: \(fields)"))
                }
            }
            return .json(Self.meditationJSON(try LibraryService(store: store).edit(m.id, edit)))
        } catch {
            return failure(error)
        }
    }

    /// Deletes a meditation; one that schedule entries play only with `force` (409 `in-use`
    /// otherwise, naming them: the page asks and sends force).
    func delete(_ id: String, force: Bool) -> Response {
        do throws(CoreError) {
            let m = try store.find(id)
            guard m.id == id else { throw CoreError.notFound(key: Display.clean(id), hint: .same("")) }
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
            return .json(.object(["entries": .array(recent), "stats": JSON(encoding: stats), "sync": syncState()]))
        } catch {
            return failure(error)
        }
    }

    func schedules() -> Response {
        do throws(CoreError) {
            let service = ScheduleService(store: store)
            return .json(.object(["schedules": JSON(encoding: try service.listing().entries), "on": .bool(try service.offSince() == nil)]))
        } catch {
            return failure(error)
        }
    }

    func setSchedule(_ id: String, _ args: [String: JSON]) -> Response {
        guard args.count == 1, case .bool(let enabled)? = args["enabled"] else {
            return .error(422, "bad-arguments", tr("an entry takes {\"enabled\": true|false}", "ein Eintrag nimmt {\"enabled\": true|false}"))
        }
        do throws(CoreError) {
            // The daemon notices the change by the timetable's counter within 2 s: nothing
            // here waits for it.
            try ScheduleService(store: store).setEnabled(id, enabled)
            return schedules()
        } catch {
            return failure(error)
        }
    }
}
