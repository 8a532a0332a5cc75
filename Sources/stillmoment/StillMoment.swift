import ArgumentParser
import Glibc
import StillMomentAudio
import StillMomentControl
import StillMomentCore
import StillMomentWeb

@main
struct StillMoment: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stillmoment",
        abstract: "A meditation timer and guided-meditation player for the shell.",
        discussion: """
            Run `stillmoment timer 20m` to sit for 20 minutes.

            Times: 20m, 90s, 1h15m, 12m30s, 3:20, 1:02:03, or a number of minutes (2.5). A timer lasts 1 s to 24 h, a preparation up to 1 h, interval gongs come at least 10 s apart, --bells takes up to 8,640 times; volumes go from 0 to 1; --strikes from 1 to 9.

            Exit codes: 0 done (or stopped by you), 1 a failure, 2 bad input, 3 the sound device cannot be opened.
            """,
        version: stillmomentVersion,
        subcommands: [
            TimerCommand.self, PresetCommand.self, ImportCommand.self, ListCommand.self, ShowCommand.self, EditCommand.self,
            DeleteCommand.self, PlayCommand.self, PreviewCommand.self, LibraryCommand.self, SoundsCommand.self, SettingsCommand.self,
            StatusCommand.self, PauseCommand.self, ResumeCommand.self, StopCommand.self, FinishCommand.self, SeekCommand.self,
            AttachCommand.self, ScheduleCommand.self, HistoryCommand.self, StatsCommand.self, DaemonCommand.self, WebCommand.self,
            ButtonCommand.self, HooksCommand.self, MQTTCommandLine.self, RoomCommand.self, RoomsCommand.self, RingCommand.self, SyncCommand.self,
        ]
    )

    /// Runs the command. Exit codes: 0 done, 1 a failure, 2 bad input (ArgumentParser's
    /// usage errors included, which it would end with 64), 3 the sound device. A plain
    /// command line of the commands typed most skips ArgumentParser (QuickParse).
    static func main() {
        _ = ProcessClock.start
        // TZ's one guard, before anything reads the time (ours or libc's).
        if let refused = ZoneRules.guardEnvironment() { Console.warning(refused.message) }
        // The web app's tables and settings, before any command opens the catalog or reads
        // the settings: every process of this executable knows them (the daemon, the CLI).
        WebRegistration.register()
        HomeRegistration.register()
        MQTTConfig.register()
        RoomSettings.register()
        let arguments = Arguments.normalized(Array(CommandLine.arguments.dropFirst()))
        do {
            if let invocation = QuickParse.invocation(arguments) {
                try invocation.run()
                return
            }
            var command = try parseAsRoot(arguments)
            try command.run()
        } catch let code as ExitCode {
            Glibc.exit(code.rawValue)
        } catch {
            if exitCode(for: error) == .validationFailure {
                let message = fullMessage(for: error)
                Console.errRaw(message)
                Glibc.exit(Exit.usage)
            }
            exit(withError: error)
        }
    }
}

/// When this process's main() began (MonotonicClock ns): a relative seek asked on the
/// command line counts from it.
enum ProcessClock {
    static let start = MonotonicClock.nanoseconds()
}
