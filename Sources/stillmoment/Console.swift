import ArgumentParser
import Glibc
import StillMomentCore

/// Plain output helpers: messages to stderr, one line each; no colour when NO_COLOR is
/// set or stdout is not a terminal.
enum Console {
    static var isTerminal: Bool { isatty(1) == 1 && isatty(0) == 1 }

    /// Prints a line; control characters (from tags, names, a daemon's answer) are
    /// stripped, so nothing printed can drive the terminal.
    static func out(_ line: String) {
        var s = Display.cleanLines(line) + "\n"
        s.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
    }

    static func err(_ line: String) {
        var s = "stillmoment: " + Display.cleanLines(line) + "\n"
        s.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }

    /// Prints ArgumentParser's usage message as it is (several lines of our own).
    static func errRaw(_ text: String) {
        var s = Display.cleanLines(text) + "\n"
        s.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }

    /// Prints the error as one line and exits non-zero.
    static func fail(_ message: String, code: Int32 = 1) -> ExitCode {
        err("error: " + message)
        return ExitCode(code)
    }
}

/// Exit codes: 0 done or stopped by the user, 1 a failure, 2 bad input, 3 the sound
/// device cannot be opened.
enum Exit {
    static let failure: Int32 = 1
    static let usage: Int32 = 2
    static let device: Int32 = 3

    /// The one map from an error's category to the exit code, for every command.
    static func code(for category: ErrorCategory) -> Int32 {
        switch category {
        case .badInput: return usage
        case .failure: return failure
        case .device: return device
        }
    }
}

extension Console {
    /// Prints the error as one line and exits with the code its category gives.
    static func fail(_ error: CoreError) -> ExitCode {
        fail(error.description, code: Exit.code(for: error.category))
    }
}

extension String {
    /// The string padded with spaces to `width` characters.
    func padded(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
