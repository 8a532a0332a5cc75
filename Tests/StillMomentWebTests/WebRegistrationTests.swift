// What the web app registers in Core at start-up: its catalog migrations under the names
// they had when they lived in Core (a catalog that has them never runs them again), kept by
// a process that did not register them; and its settings, listed and checked like Core's.
import Foundation
import Glibc
@testable import StillMomentCore
import Testing
@testable import StillMomentWeb

@Suite("Web registration")
struct WebRegistrationTests {
    static func applied(_ store: LibraryStore) throws -> [String] {
        try store.read { db in try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid") }
    }

    @Test("the web app's migrations keep their names; a catalog opened without them keeps the paired devices")
    func migrations() throws {
        WebRegistration.register()
        #expect(WebRegistration.migrations.map(\.identifier) == ["v5-web", "v9-web-lockout", "v20-web-scope"])
        let home = NSTemporaryDirectory() + "sm-webreg-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: home) }
        let store = try LibraryStore(home: home)
        // Core's, then what front-ends registered (in one test process the home front-ends'
        // may have registered theirs too), the web app's among them in their order.
        let applied = try Self.applied(store)
        let core = LibraryStore.coreMigrationIdentifiers
        let theirs = Array(applied.dropFirst(core.count))
        #expect(Array(applied.prefix(core.count)) == core)
        #expect(Set(theirs).isSubset(of: LibraryStore.registeredMigrations.map(\.identifier)))
        #expect(theirs.filter { $0.hasPrefix("v5-web") || $0.hasPrefix("v9-web") } == ["v5-web", "v9-web-lockout"])
        let (pin, _) = try PairingStore(store: store).newPIN(now: 1000)
        let paired = try PairingStore(store: store).redeem(pin: pin, deviceName: "phone", now: 1001)
        // A process that registered nothing (a Core tool) opens the same catalog…
        let plain = try LibraryStore(home: home, extensions: [])
        #expect(try Self.applied(plain).contains("v9-web-lockout"))
        // …and the web app, opening it again, runs nothing twice and finds its device.
        let again = try LibraryStore(home: home)
        #expect(try PairingStore(store: again).devices().map(\.name) == ["phone"])
        #expect(try PairingStore(store: again).device(token: paired?.token ?? "") != nil)
    }

    @Test("web-listen and web-max-upload come after Core's settings, with their defaults, checked by their rules")
    func settings() throws {
        WebRegistration.register()
        let keys = Settings.keys
        #expect(Array(keys.prefix(Settings.coreDefaults.count)) == Settings.coreDefaults.map(\.key))
        #expect(keys.contains("web-listen") && keys.contains("web-max-upload"))
        #expect(Settings().value("web-listen") == "127.0.0.1:8181" && Settings().value("web-max-upload") == "1G")
        #expect(Settings.nonTimerKeys.isSuperset(of: ["web-listen", "web-max-upload", "output-standby"]))
        let catalog = try SoundCatalog.load(folder: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sounds").path)
        var settings = Settings()
        try settings.set("web-listen", "0.0.0.0:80", catalog: catalog)
        try settings.set("web-max-upload", "500M", catalog: catalog)
        #expect(settings.timerValues.isEmpty)
        #expect(throws: CoreError.self) { try settings.set("web-listen", "localhost:80", catalog: catalog) }
        #expect(throws: CoreError.self) { try settings.set("web-max-upload", "1T", catalog: catalog) }
        #expect(settings.value("web-listen") == "0.0.0.0:80")
    }
}
