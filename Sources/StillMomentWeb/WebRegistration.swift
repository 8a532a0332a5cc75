// What the web app adds to Core: its tables in the catalog (the paired devices and the
// PIN, the wrong PINs counted) and its settings (where it listens, the largest upload).
// `register()` runs at the start of every process that may open a catalog or read the
// settings (the `stillmoment` executable's main, the web tests), before either is opened.
import StillMomentCore

public enum WebRegistration {
    /// The web app's migrations, under the names the catalog has known them by since they
    /// lived in Core (a catalog that has them never runs them again).
    static let migrations = [
        CatalogMigration("v5-web", PairingStore.createTables),
        CatalogMigration("v9-web-lockout", PairingLockout.createTable),
        CatalogMigration("v20-web-scope", PairingStore.addScope),
    ]

    /// Registers the web app's migrations and settings (harmless when done twice).
    public static func register() {
        for migration in migrations { LibraryStore.register(migration) }
        Settings.register(Settings.Registered("web-listen", default: ListenAddress.standard.description) { value throws(CoreError) in
            _ = try ListenAddress(value)
        })
        Settings.register(Settings.Registered("web-max-upload", default: "1G") { value throws(CoreError) in
            _ = try ByteSize.parse(value, option: "web-max-upload")
        })
    }
}
