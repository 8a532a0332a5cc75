/// Schedule entries between a hub and its devices, on real catalogs: an entry made on one
/// device is on every device under its UUID; switching it off and removing it travel; an
/// entry for named devices is listed everywhere and rings only on those; a bell for rooms
/// stays the rooms' own; a peer's hostile entries are refused.
import FoundationEssentials
import StillMomentAudio
import Testing
@testable import StillMomentCore

@Suite("Sync of schedule entries")
struct SyncScheduleTests {
    static func bell(_ when: String, devices: [String]? = nil, rooms: RoomChoice? = nil) throws -> NewScheduleEntry {
        NewScheduleEntry(when: try ScheduleWhen(parsing: when), action: .bell(sound: "temple-bell", strikes: 2, volume: 0.5),
                         name: "Morning bell", rooms: rooms, devices: devices)
    }

    static func view(_ r: SyncReplica) throws -> [String] {
        try ScheduleStore(store: r.store).all().map { "\($0.uuid ?? "-") \($0.when) \($0.action) \($0.enabled) \($0.devices ?? [])" }.sorted()
    }

    @Test("an entry made on one device is on every device; off and removed travel too")
    func entriesTravel() throws {
        let hub = try SyncReplica(), a = try SyncReplica(), b = try SyncReplica()
        let now = Int64(Date().timeIntervalSince1970)
        let ids = try ScheduleStore(store: a.store).add([try Self.bell("daily 07:00")], replacing: false, now: now)
        try a.cycle(with: hub)
        try b.cycle(with: hub, device: 2)
        #expect(try Self.view(b) == Self.view(a) && Self.view(hub) == Self.view(a) && Self.view(a).count == 1)
        // Nothing earlier than its arrival rings late on B.
        let onB = try #require(try ScheduleStore(store: b.store).all().first)
        #expect(onB.lastHandled >= now - 1)
        try ScheduleStore(store: b.store).setEnabled(onB.id, false, now: now)
        try b.cycle(with: hub, device: 2)
        try a.cycle(with: hub)
        #expect(try ScheduleStore(store: a.store).all().map(\.enabled) == [false])
        try ScheduleStore(store: a.store).remove(ids[0])
        try a.cycle(with: hub)
        try b.cycle(with: hub, device: 2)
        #expect(try ScheduleStore(store: b.store).all().isEmpty && ScheduleStore(store: hub.store).all().isEmpty)
    }

    @Test("an entry for named devices is listed everywhere and rings only on those")
    func namedDevices() throws {
        let hub = try SyncReplica(), a = try SyncReplica(), b = try SyncReplica()
        try a.sync.setDeviceName("pi-bedroom")
        try b.sync.setDeviceName("Pi-Hall")
        let now = Int64(Date().timeIntervalSince1970)
        try ScheduleStore(store: a.store).add([try Self.bell("daily 07:00", devices: ["pi-hall"])], replacing: false, now: now)
        try a.cycle(with: hub)
        try b.cycle(with: hub, device: 2)
        let onA = try #require(try ScheduleStore(store: a.store).all().first)
        let onB = try #require(try ScheduleStore(store: b.store).all().first)
        #expect(onA.elsewhere && !onB.elsewhere && onB.devices == ["pi-hall"])
        let week = (now, now + 7 * 86_400)
        #expect(try ScheduleService(store: a.store).upcoming(from: week.0, until: week.1, count: 10).isEmpty)
        #expect(try ScheduleService(store: b.store).upcoming(from: week.0, until: week.1, count: 10).count == 7)
        let listing = try ScheduleService(store: a.store).listing(now: now).entries
        #expect(listing.first?.next == nil && listing.first?.elsewhere == true && listing.first?.devices == "pi-hall")
    }

    @Test("a timer entry's sound device stays on its device: not sent, and kept when a peer's change of the entry is applied")
    func deviceStays() throws {
        let hub = try SyncReplica(), a = try SyncReplica(), b = try SyncReplica()
        let now = Int64(Date().timeIntervalSince1970)
        var request = TimerRequest()
        request.duration = 600_000
        request.device = try DeviceName(parsing: "null")
        let entry = NewScheduleEntry(when: try ScheduleWhen(parsing: "daily 07:00"), action: .timer(preset: nil, request: request), name: "Sit")
        try ScheduleStore(store: a.store).add([entry], replacing: false, now: now)
        try a.cycle(with: hub)
        try b.cycle(with: hub, device: 2)
        guard case .timer(_, let onB)? = try ScheduleStore(store: b.store).all().first?.action else { Issue.record("no timer on B"); return }
        #expect(onB.device == nil && onB.duration == 600_000)
        // B switches it off; A applies that and keeps its own device.
        let idB = try #require(try ScheduleStore(store: b.store).all().first?.id)
        try ScheduleStore(store: b.store).setEnabled(idB, false, now: now)
        try b.cycle(with: hub, device: 2)
        try a.cycle(with: hub)
        let onA = try #require(try ScheduleStore(store: a.store).all().first)
        guard case .timer(_, let mine) = onA.action else { Issue.record("no timer on A"); return }
        #expect(!onA.enabled && mine.device?.text == "null")
    }

    @Test("a bell for rooms stays the rooms' own; a peer's hostile entries are refused whole")
    func roomsAndHostile() throws {
        let a = try SyncReplica()
        let now = Int64(Date().timeIntervalSince1970)
        try ScheduleStore(store: a.store).add([try Self.bell("daily 07:00", rooms: try RoomChoice(parsing: "all"))], replacing: false, now: now)
        #expect(try a.sync.pending().filter { $0.kind == .schedule }.isEmpty)
        let stamp = try #require(HybridTimestamp(milliseconds: SyncJournal.wallMilliseconds(), counter: 0, node: SyncTests.nodeB))
        func entry(_ when: String, _ action: ScheduleAction, name: String? = nil) -> String {
            JSON(encoding: SyncSchedule.Entry(when: when, action: JSON(encoding: action).line, name: name)).line
        }
        var device = TimerRequest()
        device.duration = 600_000
        device.device = try DeviceName(parsing: "null")
        let hostile: [(String, String)] = [
            ("entry", entry("daily 07:00", .timer(preset: nil, request: device))),
            ("entry", entry("tomorrow-ish", .bell(sound: "temple-bell", strikes: 1, volume: 1))),
            ("entry", entry("daily 07:00", .bell(sound: "../../x", strikes: 1, volume: 1))),
            ("entry", entry("daily 07:00", .bell(sound: "temple-bell", strikes: 1, volume: 1e300))),
            ("entry", entry("daily 07:00", .play(meditation: LibraryRef(id: "../x", name: "x")))),
            ("entry", entry("daily 07:00", .bell(sound: "temple-bell", strikes: 1, volume: 1), name: "a\u{202E}b")),
            ("enabled", "1"),
            ("devices", JSON(encoding: (0..<21).map { "d\($0)" }).line),
            ("devices", JSON(encoding: ["a\u{7}"]).line),
            ("room", "1"),
        ]
        for (field, value) in hostile {
            let c = SyncChange(kind: .schedule, id: "abababab-0000-4000-8000-000000000009", field: field, value: value, stamp: stamp)
            #expect(throws: SyncError.self, "\(field) \(value)") { try a.sync.receive([c]) }
        }
        #expect(try ScheduleStore(store: a.store).all().count == 1)
    }
}

@Suite("Sync of shared settings")
struct SyncSettingsTests {
    static func settings(_ r: SyncReplica) throws -> Settings { try Settings.load(path: r.store.home + "/settings.json") }

    static func set(_ r: SyncReplica, _ key: String, _ value: String) throws {
        let catalog = try SoundCatalog.withCustomSounds(store: r.store)
        try Settings.update(path: r.store.home + "/settings.json") { s throws(CoreError) in try s.set(key, value, catalog: catalog) }
    }

    @Test("the timer's defaults travel, the device and the volumes stay; a reset travels as the default; a peer's hostile settings are refused")
    func shared() throws {
        let hub = try SyncReplica(), a = try SyncReplica(), b = try SyncReplica()
        try Self.set(a, "duration", "25m")
        try Self.set(a, "gong", "clear-strike")
        try Self.set(a, "gong-volume", "0.3")
        try Self.set(a, "device", "null")
        try a.cycle(with: hub)
        try b.cycle(with: hub, device: 2)
        for r in [hub, b] {
            let s = try Self.settings(r)
            #expect(s.value("duration") == "25m" && s.value("gong") == "clear-strike")
            #expect(s.isDefault("gong-volume") && s.isDefault("device"), "volumes and the device stay on their device")
        }
        // B changes it later; A resets the gong: both travel, and nothing echoes back as a change.
        SyncTests.nextMillisecond()
        try Self.set(b, "duration", "40m")
        try Settings.update(path: a.store.home + "/settings.json") { s throws(CoreError) in s.reset("gong") }
        try b.cycle(with: hub, device: 2)
        try a.cycle(with: hub)
        try b.cycle(with: hub, device: 2)
        for r in [hub, a, b] {
            let s = try Self.settings(r)
            #expect(s.value("duration") == "40m" && s.isDefault("gong"))
        }
        #expect(try a.sync.pending().isEmpty && b.sync.pending().isEmpty, "a peer's setting written here is not recorded again")
        let stamp = try #require(HybridTimestamp(milliseconds: SyncJournal.wallMilliseconds(), counter: 0, node: SyncTests.nodeB))
        for (field, value) in [("device", JSON.string("file:'|touch /tmp/x'").line), ("duration", JSON.string("1e300").line),
                               ("gong-volume", JSON.string("1").line), ("duration", "42"), ("gong", JSON.string("a\u{7}").line)] {
            let c = SyncChange(kind: .setting, id: SyncSettings.record, field: field, value: value, stamp: stamp)
            #expect(throws: SyncError.self, "\(field) \(value)") { try a.sync.receive([c]) }
        }
        #expect(try Self.settings(a).value("duration") == "40m" && Self.settings(a).value("device") == "null")
    }
}

@Suite("Settings naming a sound that is not here")
struct SettingsFallbackTests {
    @Test("a sound the settings name that is not here plays as the default; `settings set` still refuses one")
    func fallback() throws {
        let catalog = try SoundCatalog.bundled()
        var settings = Settings()
        #expect(throws: CoreError.self) { try settings.set("gong", "my-bell", catalog: catalog) }
        try settings.set("duration", "15m", catalog: catalog)
        // As a peer's shared setting writes it (its sound still arriving).
        settings.setShared("gong", "my-bell")
        settings.setShared("ambience", "garden-rain")
        let config = try TimerConfiguration(settings: settings, options: [:], catalog: catalog)
        #expect(config.duration == 900_000)
        // A typed option is strict.
        #expect(throws: CoreError.self) { try TimerConfiguration(settings: settings, options: ["gong": "my-bell"], catalog: catalog) }
    }
}

@Suite("The sync clock reset")
struct SyncClockResetTests {
    @Test("a clock that ran a day ahead: its changes are refused until `sync reset-clock` stamps them again from now; others keep theirs")
    func reset() throws {
        let hub = try SyncReplica(), a = try SyncReplica()
        _ = try a.presets.save("Before", request: try TimerRequest(text: ["duration": "5m"]), catalog: SyncTests.catalog)
        try a.cycle(with: hub)
        let day: Int64 = 86_400_000
        try a.store.write { db in
            let node = try SyncJournal.node(db)
            let ahead = try #require(HybridTimestamp(milliseconds: SyncJournal.wallMilliseconds() + day, counter: 0, node: node))
            try SyncJournal.setState(db, "clock", ahead.description)
        }
        _ = try a.presets.save("Ahead", request: try TimerRequest(text: ["duration": "7m"]), catalog: SyncTests.catalog)
        #expect(throws: SyncError.self) { try a.cycle(with: hub) }
        let kept = try a.store.read { db in try String.fetchOne(db, sql: "SELECT stamp FROM syncField WHERE pending = 0 ORDER BY stamp DESC LIMIT 1") }
        #expect(try a.sync.resetClock() == 3, "the new preset's three fields")
        try a.cycle(with: hub)
        #expect(try hub.presets.all().map(\.name).sorted() == ["Ahead", "Before"])
        // What the hub took before keeps its stamp; the clock is back near now.
        #expect(try a.store.read { db in try String.fetchOne(db, sql: "SELECT stamp FROM syncField WHERE stamp = ?", arguments: [kept]) } == kept)
        let clock = try a.store.read { db in try SyncJournal.state(db, "clock") }.flatMap(HybridTimestamp.init(text:))
        #expect((clock?.milliseconds ?? .max) < SyncJournal.wallMilliseconds() + 60_000)
    }
}

