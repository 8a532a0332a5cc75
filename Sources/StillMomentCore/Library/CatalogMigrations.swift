// The catalog's schema: Core's migrations in their order, then the ones a front-end
// registered at start-up (the web app's pairing tables), each run once under its name.
import GRDB
import Synchronization

/// A migration a front-end adds to the catalog. It touches its own tables only: it may run
/// after any of Core's (a catalog made by a process that did not register it gets it the
/// first time a process that did opens it), and a process that did not register it leaves
/// its tables and its row in `grdb_migrations` alone (GRDB ignores applied migrations it
/// does not know).
public struct CatalogMigration: Sendable {
    /// Its name in `grdb_migrations`: once applied under a name, never run again under it.
    public let identifier: String
    let migrate: @Sendable (Database) throws -> Void

    public init(_ identifier: String, _ migrate: @escaping @Sendable (Database) throws -> Void) {
        self.identifier = identifier
        self.migrate = migrate
    }
}

extension LibraryStore {
    private static let registry = Mutex<[CatalogMigration]>([])

    /// Adds a front-end's migration to every catalog this process opens from now on: call
    /// it at start-up, before any store is opened. A name already known (Core's, or one
    /// registered before) is ignored, so registering twice is harmless.
    public static func register(_ migration: CatalogMigration) {
        guard !coreMigrationIdentifiers.contains(migration.identifier) else { return }
        registry.withLock { list in
            if !list.contains(where: { $0.identifier == migration.identifier }) { list.append(migration) }
        }
    }

    /// The front-ends' migrations registered so far, in their order.
    public static var registeredMigrations: [CatalogMigration] { registry.withLock { $0 } }

    /// Core's own migrations, in their order (never renamed: a catalog knows them by name).
    static let coreMigrationIdentifiers = coreMigrations.map(\.identifier)

    private static let coreMigrations: [CatalogMigration] = [
        CatalogMigration("v1", createCatalogTables),
        CatalogMigration("v2-practice", PracticeLog.createTables),
        CatalogMigration("v3-presets", PresetStore.createTables),
        CatalogMigration("v4-schedule", ScheduleStore.createTables),
        // (v5-web: the web app's, registered by it)
        CatalogMigration("v6-seek-index", createSeekIndexTable),
        CatalogMigration("v7-sound-length", addSoundLengthColumn),
        CatalogMigration("v8-schedule-references", ScheduleStore.addReferences),
        // (v9-web-lockout: the web app's)
        CatalogMigration("v10-practice-totals", PracticeTotals.create),
        // (v11-home-buttons, v12-home-hooks: the home front-ends')
        CatalogMigration("v13-schedule-switch", ScheduleStore.createSwitch),
        CatalogMigration("v14-schedule-rooms", ScheduleStore.addRooms),
        CatalogMigration("v15-sync", SyncJournal.createTables),
        CatalogMigration("v16-sync-peers", SyncJournal.createPeers),
        CatalogMigration("v17-sync-meditations", SyncMeditations.migrate),
        CatalogMigration("v18-sync-sounds", SyncSounds.seed),
        CatalogMigration("v19-sync-schedule", SyncSchedule.migrate),
    ]

    /// Core's migrations, then `extensions`.
    static func migrator(extensions: [CatalogMigration]) -> DatabaseMigrator {
        var m = DatabaseMigrator()
        for migration in coreMigrations + extensions {
            m.registerMigration(migration.identifier, migrate: migration.migrate)
        }
        return m
    }

    private static func createCatalogTables(_ db: Database) throws {
        try db.create(table: "meditation") { t in meditationColumns(t, uniqueHash: true) }
        try db.create(table: "customSound") { t in
            t.primaryKey("id", .text)
            t.column("storedFile", .text).notNull().unique()
            t.column("kind", .text).notNull()
            t.column("name", .text).notNull()
            t.column("size", .integer).notNull()
            t.column("contentHash", .text).notNull()
            t.column("dateAdded", .datetime).notNull()
        }
    }

    /// The meditation table's columns: v1's (the content hash unique) and v17's (one content
    /// may be two meditations, made on two devices), in one place.
    static func meditationColumns(_ t: TableDefinition, uniqueHash: Bool) {
        t.primaryKey("id", .text)
        t.column("storedFile", .text).notNull().unique()
        t.column("originalName", .text).notNull()
        t.column("durationFrames", .integer).notNull()
        t.column("sampleRate", .integer).notNull()
        t.column("teacher", .text).notNull()
        t.column("name", .text).notNull()
        t.column("album", .text)
        t.column("dateAdded", .datetime).notNull()
        t.column("trimStart", .integer)
        t.column("trimEnd", .integer)
        t.column("startGong", .text)
        t.column("endGong", .text)
        t.column("size", .integer).notNull()
        let hash = t.column("contentHash", .text).notNull()
        if uniqueHash { hash.unique() }
        t.column("loudnessGain", .double).notNull()
        t.column("lastPosition", .integer)
    }
}
