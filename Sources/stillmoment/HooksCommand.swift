// `hooks`: programs the daemon runs when a sit or a guided meditation starts or ends (argv,
// never a shell; the session's facts in STILLMOMENT_* variables; a timeout; output to the
// daemon's log). Stored in the catalog (HookStore); a running daemon is told to read them again.
import ArgumentParser
import Glibc
import StillMomentControl
import StillMomentCore

struct HooksCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hooks",
        abstract: "Programs run when a session starts or ends.",
        discussion: """
            stillmoment hooks add on-end /usr/local/bin/log-sit --quiet
            The program runs without a shell, with STILLMOMENT_EVENT, _KIND (timer, guided), _NAME, _PRESET, \
            _MEDITATION_ID, _TEACHER, _SESSION_ID, _START (Unix seconds), _PLANNED_SECONDS, _SCHEDULED (0/1), and at \
            the end _HEARD_SECONDS and _END_REASON (completed, finished, stopped, replaced, preempted, failed). It \
            may run 30 s (then it and what it started are killed); its output goes to the daemon's log; a failure is \
            logged, never retried.
            """,
        subcommands: [Add.self, List.self, Remove.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Add a hook: on-start|on-end COMMAND [ARGS…].")
        @Argument(help: "on-start or on-end.") var when: String
        @Argument(parsing: .captureForPassthrough, help: "The program (a path, or a name found in PATH now) and its arguments.")
        var command: [String] = []

        func run() throws {
            guard let event = Hook.When(rawValue: when) else {
                throw Console.fail(tr("'\(Display.clean(String(when.prefix(40))))' is not a hook's moment: on-start or on-end",
                                      "'\(Display.clean(String(when.prefix(40))))' ist kein Zeitpunkt für einen Hook: on-start oder on-end"), code: 2)
            }
            var argv = command.first == "--" ? Array(command.dropFirst()) : command
            if let program = argv.first, !program.isEmpty, !program.contains("/") {
                guard let found = Self.inPath(program) else {
                    throw Console.fail(tr("'\(Display.clean(program))' is not a program in PATH; give its path",
                                          "'\(Display.clean(program))' ist kein Programm im PATH; gib seinen Pfad an"), code: 2)
                }
                argv[0] = found
            } else if let program = argv.first, !program.hasPrefix("/"), let cwd = getcwd(nil, 0) {
                argv[0] = String(decoding: UnsafeRawBufferPointer(start: cwd, count: strlen(cwd)), as: UTF8.self) + "/" + program
                free(cwd)
            }
            do {
                let hook = try HookStore(store: try openStore()).add(event, argv: argv)
                if access(hook.argv[0], X_OK) != 0 {
                    Console.warning(tr("\(Display.clean(hook.argv[0])) is not an executable file (yet)", "\(Display.clean(hook.argv[0])) ist (noch) keine ausführbare Datei"))
                }
                Console.out(tr("hook \(hook.id): \(event.rawValue) \(HooksCommand.line(hook.argv))", "Hook \(hook.id): \(event.rawValue) \(HooksCommand.line(hook.argv))"))
                ButtonCommand.notifyDaemon()
            } catch let error as CoreError {
                throw Console.fail(error)
            }
        }

        /// The program's path in PATH, as the shell would find it.
        static func inPath(_ name: String) -> String? {
            let path = Environment.value("PATH") ?? "/usr/local/bin:/usr/bin:/bin"
            for dir in path.split(separator: ":") where dir.hasPrefix("/") {
                let candidate = "\(dir)/\(name)"
                if access(candidate, X_OK) == 0 { return candidate }
            }
            return nil
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the hooks (id, moment, command).")
        func run() throws {
            do {
                let hooks = try HookStore(store: try openStore()).all()
                if hooks.isEmpty { Console.out(tr("no hooks (add one with `stillmoment hooks add on-end COMMAND`)", "keine Hooks (einen hinzufügen mit `stillmoment hooks add on-end KOMMANDO`)")) }
                for h in hooks { Console.out("\(String(h.id).padded(to: 4)) \(h.when.rawValue.padded(to: 9)) \(HooksCommand.line(h.argv))") }
            } catch let error as CoreError {
                throw Console.fail(error)
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove a hook by its id (from `hooks list`).")
        @Argument(help: "The hook's id.") var id: String
        func run() throws {
            guard let n = Int64(id), n > 0 else {
                throw Console.fail(tr("'\(Display.clean(String(id.prefix(40))))' is not a hook's id (see `stillmoment hooks list`)",
                                      "'\(Display.clean(String(id.prefix(40))))' ist keine Hook-Nummer (siehe `stillmoment hooks list`)"), code: 2)
            }
            do {
                guard try HookStore(store: try openStore()).remove(id: n) else {
                    throw Console.fail(tr("no hook \(n) (see `stillmoment hooks list`)", "kein Hook \(n) (siehe `stillmoment hooks list`)"), code: 2)
                }
                Console.out(tr("hook \(n) removed", "Hook \(n) entfernt"))
                ButtonCommand.notifyDaemon()
            } catch let error as CoreError {
                throw Console.fail(error)
            }
        }
    }

    /// The words as a shell would read them back.
    static func line(_ argv: [String]) -> String { argv.map(ShellWords.quote).joined(separator: " ") }
}
