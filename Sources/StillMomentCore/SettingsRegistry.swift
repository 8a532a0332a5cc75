// Settings a front-end adds to `settings.json` (the web app: where it listens, the largest
// upload), registered at start-up before the settings are read, each with its default and
// the check a value must pass: `settings show`, `set` and `reset` treat them as Core's own.
import Synchronization

extension Settings {
    /// A front-end's setting: its key, its default, and its check (throws the one-line error).
    public struct Registered: Sendable {
        public let key: String
        public let defaultValue: String
        let validate: @Sendable (String) throws(CoreError) -> Void

        public init(_ key: String, default defaultValue: String, validate: @escaping @Sendable (String) throws(CoreError) -> Void) {
            self.key = key
            self.defaultValue = defaultValue
            self.validate = validate
        }
    }

    private static let registry = Mutex<[Registered]>([])

    /// Adds a front-end's setting for the rest of this process: call it at start-up, before
    /// any settings are read (a file that holds a key not registered is refused as a typo).
    /// A key already known (Core's, or one registered before) is ignored.
    public static func register(_ setting: Registered) {
        guard !coreDefaults.contains(where: { $0.key == setting.key }) else { return }
        registry.withLock { list in
            if !list.contains(where: { $0.key == setting.key }) { list.append(setting) }
        }
    }

    /// The front-ends' settings registered so far, in their order.
    static var registered: [Registered] { registry.withLock { $0 } }
}
