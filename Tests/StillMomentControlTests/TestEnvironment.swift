// The process's environment is one for every suite, and suites run in parallel: a helper
// that sets STILLMOMENT_HOME and then opens what reads it (a store, a daemon) does both
// under this lock, so another suite's helper cannot point it at its own home in between
// (a daemon test once opened the session service tests' store: one import was a duplicate,
// and the other test's file was gone when its home was removed).
import Foundation

enum TestEnvironment {
    private static let lock = NSLock()

    /// Runs `body` (setenv and what reads it) with no other helper's setenv in between.
    static func exclusive<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}
