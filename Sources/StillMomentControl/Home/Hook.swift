// A hook: a program the daemon runs when a session starts or ends, by its argv (never
// through a shell), and the one check of what may be a hook.
import StillMomentCore

public struct Hook: Sendable, Equatable {
    public enum When: String, Sendable, CaseIterable {
        case onStart = "on-start", onEnd = "on-end"
    }
    public var id: Int64
    public var when: When
    public var argv: [String]

    public init(id: Int64, when: When, argv: [String]) {
        self.id = id
        self.when = when
        self.argv = argv
    }

    /// At most this many words, each at most 4,096 bytes.
    public static let maxWords = 64

    /// The one rule: an absolute path to a program, then its arguments; no control
    /// characters (a hook is listed and logged), no NUL (it goes to execve).
    public static func check(_ argv: [String]) throws(CoreError) -> [String] {
        guard let program = argv.first, !program.isEmpty else {
            throw CoreError.badRequest(both("a hook needs a COMMAND", "ein Hook braucht ein KOMMANDO"))
        }
        guard argv.count <= maxWords else {
            throw CoreError.badRequest(both("a hook takes at most \(maxWords) words", "ein Hook nimmt höchstens \(maxWords) Wörter"))
        }
        for word in argv {
            guard word.utf8.count <= 4096, !word.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
                throw CoreError.badRequest(both("a hook's words must be text of at most 4096 bytes without control characters",
                                                "die Wörter eines Hooks müssen Text von höchstens 4096 Bytes ohne Steuerzeichen sein"))
            }
        }
        guard program.hasPrefix("/") else {
            throw CoreError.badValue(option: "COMMAND", reason: both("'\(Display.clean(program))' must be an absolute path (hooks run without a shell)",
                                                                     "'\(Display.clean(program))' muss ein absoluter Pfad sein (Hooks laufen ohne Shell)"))
        }
        return argv
    }
}
