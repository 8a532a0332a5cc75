// A front-end's catalog migrations (registered, like the web app's pairing tables): run once
// under their name, after Core's; a process that did not register them opens the catalog
// and leaves their tables and rows alone; a catalog made without them gets them later.
import GRDB
import Testing
@testable import StillMomentCore

@Suite("Registered catalog migrations")
struct CatalogMigrationTests {
    /// A front-end's table, made without IF NOT EXISTS: run a second time, it would fail.
    static let extra = CatalogMigration("v9-test-extra") { db in
        try db.execute(sql: "CREATE TABLE extraThing (name TEXT NOT NULL)")
    }

    static func applied(_ store: LibraryStore) throws -> [String] {
        try store.read { db in try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid") }
    }

    static func things(_ store: LibraryStore) throws -> [String] {
        try store.read { db in try String.fetchAll(db, sql: "SELECT name FROM extraThing") }
    }

    @Test("a registered migration runs once after Core's; a process without it keeps its table and rows")
    func withAndWithout() throws {
        let home = LibraryTempHome()
        let withIt = try LibraryStore(home: home.path, extensions: [Self.extra])
        #expect(try Self.applied(withIt) == LibraryStore.coreMigrationIdentifiers + ["v9-test-extra"])
        try withIt.write { db in try db.execute(sql: "INSERT INTO extraThing (name) VALUES ('kept')") }
        // A process that did not register it (a Core tool, an older CLI): opens, changes nothing of it.
        let without = try LibraryStore(home: home.path, extensions: [])
        #expect(try Self.applied(without).contains("v9-test-extra"))
        #expect(try Self.things(without) == ["kept"])
        // With it again: not run again (it would fail on the existing table), nothing lost.
        let again = try LibraryStore(home: home.path, extensions: [Self.extra])
        #expect(try Self.things(again) == ["kept"])
        #expect(try Self.applied(again).filter { $0 == "v9-test-extra" }.count == 1)
    }

    @Test("a catalog made by a process without the migration gets it when one with it opens the catalog")
    func later() throws {
        let home = LibraryTempHome()
        let first = try LibraryStore(home: home.path, extensions: [])
        #expect(try Self.applied(first) == LibraryStore.coreMigrationIdentifiers)
        let second = try LibraryStore(home: home.path, extensions: [Self.extra])
        #expect(try Self.applied(second) == LibraryStore.coreMigrationIdentifiers + ["v9-test-extra"])
        #expect(try Self.things(second).isEmpty)
    }

    @Test("registering a name Core has, or one twice, changes nothing")
    func registeringTwice() {
        let before = LibraryStore.registeredMigrations.map(\.identifier)
        LibraryStore.register(CatalogMigration("v1") { _ in Issue.record("Core's v1 replaced") })
        #expect(LibraryStore.registeredMigrations.map(\.identifier) == before)
    }
}
