import ArgumentParser

@main
struct StillMoment: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stillmoment",
        abstract: "A meditation timer and guided-meditation player for the shell.",
        discussion: "Run `stillmoment timer 20m` to sit for 20 minutes.",
        version: "0.1.0",
        subcommands: [
            TimerCommand.self, ImportCommand.self, ListCommand.self, ShowCommand.self, EditCommand.self,
            DeleteCommand.self, PlayCommand.self, PreviewCommand.self, LibraryCommand.self, SoundsCommand.self, SettingsCommand.self,
            StatusCommand.self, PauseCommand.self, ResumeCommand.self, StopCommand.self, SeekCommand.self,
            AttachCommand.self, DaemonCommand.self,
        ]
    )
}
