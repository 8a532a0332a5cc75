import ArgumentParser
import Glibc
import StillMomentAudio
import StillMomentControl
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
        error(message)
        return ExitCode(code)
    }

    /// `error: …` (`Fehler: …`) on stderr.
    static func error(_ message: String) {
        err(tr("error: ", "Fehler: ") + message)
    }

    /// Runs `delete`; when what it deletes is used by the schedule and this is a terminal,
    /// asks (y/N) and deletes anyway on yes; otherwise the error stands (`--force` deletes).
    static func deleteAsking(_ delete: (_ force: Bool) throws(CoreError) -> Void) throws(CoreError) {
        do { try delete(false) } catch {
            guard case .inUse = error, isTerminal else { throw error }
            err(error.description)
            var s = tr("delete anyway? [y/N] ", "trotzdem löschen? [j/N] ")
            s.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
            let answer = readLine()?.trimmingWhitespace().lowercased() ?? ""
            guard ["y", "yes", "j", "ja"].contains(answer) else { throw CoreError.badRequest(both("nothing deleted", "nichts gelöscht")) }
            try delete(true)
        }
    }

    /// `warning: …` (`Warnung: …`) on stderr.
    static func warning(_ message: String) {
        err(tr("warning: ", "Warnung: ") + message)
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

    /// A daemon's refusal: the same map, by its code.
    static func code(for refusal: ErrorCode) -> Int32 {
        switch refusal {
        case .badArguments, .unknownCommand, .badRequest: return usage
        case .device: return device
        case .tooLong, .malformed, .notHello, .badVersion, .noSession, .failed, .forbidden, .busy: return failure
        }
    }
}

extension Console {
    /// Prints the error as one line and exits with the code its category gives.
    static func fail(_ error: CoreError) -> ExitCode {
        fail(text(error), code: Exit.code(for: error.category))
    }

    /// An error of the core as one line in the user's language (a device's hint too).
    static func text(_ error: CoreError) -> String {
        if case .device(let device) = error { return Display.clean(device.text()) }
        return error.description
    }

    /// Any error as one line in the user's language.
    static func text(_ error: any Error) -> String {
        if let core = error as? CoreError { return text(core) }
        if let audio = error as? AudioError { return Display.clean(audio.text()) }
        return "\(error)"
    }
}

extension String {
    /// The string padded with spaces to `width` characters.
    func padded(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
