// What the home front-ends (buttons, the LED, hooks) add to Core: their tables in the
// catalog (`button`, `hook`) and their setting (`led`, the LED's name; empty: none).
// `register()` runs at the start of every process that may open a catalog or read the
// settings (the `stillmoment` executable's main, the tests), before either is opened.
import GRDB
import StillMomentCore

public enum HomeRegistration {
    static let migrations = [
        CatalogMigration("v11-home-buttons", ButtonStore.createTable),
        CatalogMigration("v12-home-hooks", HookStore.createTable),
    ]

    /// Registers the tables and the setting (harmless when done twice).
    public static func register() {
        for migration in migrations { LibraryStore.register(migration) }
        Settings.register(Settings.Registered("led", default: "") { value throws(CoreError) in
            _ = try LEDName(value)
        })
    }
}
