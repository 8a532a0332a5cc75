// QuickParse against ArgumentParser: every command line the quick reader takes must mean
// what ArgumentParser makes of it (the same Invocation), and what it does not take must
// be left to ArgumentParser (help, errors, the forms that run in this process).
import ArgumentParser
import Testing
@testable import stillmoment
import StillMomentControl
import StillMomentCore

@Suite("The quick reader of plain command lines")
struct QuickParseTests {
    /// What ArgumentParser makes of the command line, as an Invocation (nil: it runs in
    /// this process, or it is a command QuickParse never reads).
    static func parsed(_ args: [String]) throws -> Invocation? {
        let command = try StillMoment.parseAsRoot(args)
        switch command {
        case let c as StatusCommand: return c.invocation()
        case let c as PauseCommand: return c.invocation()
        case let c as ResumeCommand: return c.invocation()
        case let c as StopCommand: return c.invocation()
        case let c as FinishCommand: return c.invocation()
        case let c as SeekCommand: return try c.invocation()
        case let c as TimerCommand: return try c.invocation()
        case let c as PlayCommand: return try c.invocation()
        case let c as DaemonCommand: return c.invocation()
        default: return nil
        }
    }

    /// The quick reading of a command line as main() sees it, and (when it was read)
    /// ArgumentParser's.
    static func both(_ line: [String]) -> (quick: Invocation?, parser: Result<Invocation?, any Error>) {
        let args = Arguments.normalized(line)
        guard let quick = QuickParse.invocation(args) else { return (nil, .success(nil)) }
        return (quick, Result { try parsed(args) })
    }

    static let plain: [[String]] = [
        ["status"], ["status", "--json"], ["pause"], ["resume"], ["stop"], ["finish"],
        ["seek", "+15s"], ["seek", "-15s"], ["seek", "12:30"], ["seek", "1:02:03"], ["seek", "-1m30s"], ["seek", "x"],
        ["daemon"], ["daemon", "--on-demand"], ["daemon", "--on-demand", "--ready-fd", "3"],
        ["timer"], ["timer", "20m"], ["timer", "open"], ["timer", "20m", "--detach"],
        ["timer", "1m", "--preparation", "off", "--device", "hw:Loopback,0", "--detach"],
        ["timer", "--duration", "5m", "--interval", "5m", "--ambience", "forest", "--ambience-volume", "0.3"],
        ["timer", "45m", "--bells", "-2m"], ["timer", "45m", "--bells=5m,12m30s,-2m"], ["timer", "--device=hw:0,0"],
        ["timer", "--sections", "sit 25m, walk 5m, sit 25m", "--section-strikes", "2,1", "--random-bells", "3m-10m", "--seed", "7"],
        ["timer", "--preset", "morning", "--gong", "temple", "--gong-volume", "0.8", "--strikes", "3"],
        ["timer", "--interval-mode", "before-end", "--interval-gong", "bowl", "--interval-volume", "1", "--ambience-during", "sit"],
        ["timer", "20m", "--gong", "nonexistent", "--strikes", "99"],   // refused by the daemon, not by the reader
        ["play", "tone"], ["play", "Body Scan", "--detach"], ["play", "tone", "--from", "3:20", "--device", "null"],
        ["play", "tone", "--resume", "--preparation", "15s"], ["play", "tone", "--preparation", "off", "--detach"],
    ]

    @Test("plain command lines are read without ArgumentParser, as ArgumentParser reads them")
    func plainLines() {
        for line in Self.plain {
            let (quick, parser) = Self.both(line)
            #expect(quick != nil, "\(line) not read")
            switch parser {
            case .success(let invocation): #expect(quick == invocation, "\(line): \(String(describing: quick)) vs \(String(describing: invocation))")
            case .failure(let error): Issue.record("\(line): ArgumentParser refused it: \(error)")
            }
        }
    }

    @Test("help, errors and what runs in this process are left to ArgumentParser")
    func leftToArgumentParser() {
        let lines: [[String]] = [
            [], ["help"], ["--help"], ["-h"], ["--version"], ["pause", "--help"], ["status", "--json", "--json"],
            ["status", "-h"], ["stop", "now"], ["seek"], ["seek", "1", "2"], ["seek", "--help"], ["seek", "help"],
            ["daemon", "--bogus"], ["daemon", "--ready-fd", "3"], ["daemon", "--on-demand", "--ready-fd", "-1"],
            ["daemon", "--on-demand", "--ready-fd", "x"], ["daemon", "--on-demand", "--ready-fd"], ["timer", "--help"], ["timer", "help"], ["timer", "20m", "--plan"],
            ["timer", "20m", "--output", "x.wav"], ["timer", "20m", "--foreground"], ["timer", "20m", "--format", "s16"],
            ["timer", "20m", "--duration", "5m"], ["timer", "20m", "30m"], ["timer", "--device"], ["timer", "--device", "--detach"],
            ["timer", "--device", ""], ["timer", "--device="], ["timer", "--gong", "a", "--gong", "b"], ["timer", "--detach", "--detach"],
            ["timer", "--bogus", "x"], ["timer", "-5m"], ["timer", "--", "5m"], ["timer", "--json"], ["timer", "--open", "yes"],
            ["play"], ["play", "a", "b"], ["play", "tone", "--from", "1:00", "--resume"], ["play", "tone", "--from", "abc"],
            ["play", "tone", "--preparation", "soon"], ["play", "tone", "--output", "x.wav"], ["play", "tone", "--foreground"],
            ["play", "tone", "--gong", "x"], ["preview", "tone"], ["attach"], ["list"], ["library", "verify"],
        ]
        for line in lines {
            #expect(QuickParse.invocation(Arguments.normalized(line)) == nil, "\(line) read")
        }
    }

    @Test("each timer option's value is kept under its own name")
    func timerOptionText() throws {
        for option in TimerOptions.all {
            let options = try TimerOptions.parse(["--\(option.rawValue)", "value of \(option.rawValue)"])
            #expect(options.text == [option.rawValue: "value of \(option.rawValue)"])
        }
        #expect(Set(TimerOptions.all).count == TimerOptions.all.count)
        // every option of a timer request is one, but two given otherwise: the interval's
        // length with --interval, an open sit as the duration `open`
        #expect(Set(TimerOption.allCases).subtracting(TimerOptions.all) == [.intervalLength, .open])
    }

    @Test("random command lines: whatever the quick reader takes, ArgumentParser reads the same")
    func randomLines() {
        let commands = ["timer", "play", "status", "pause", "seek", "daemon", "stop"]
        let options = QuickParse.timerOptions.sorted().map { "--" + $0 } + [
            "--preset", "--from", "--plan", "--output", "--format", "--foreground", "--json", "--on-demand", "--resume",
        ]
        let flags = ["--detach", "--resume", "--json", "--on-demand", "--plan", "--foreground", "--", "-h", "--help"]
        let values = ["20m", "open", "tone", "1:00", "-2m", "+15s", "0.5", "forest", "x=y", "a b", "help", "", "--detach", "off", "12"]
        var random = SplitMix(seed: 20261127)
        var read = 0
        for _ in 0..<1500 {
            var line = [commands[random.below(commands.count)]]
            for _ in 0..<random.below(6) {
                switch random.below(4) {
                case 0: line += [options[random.below(options.count)], values[random.below(values.count)]]
                case 1: line.append(options[random.below(options.count)] + "=" + values[random.below(values.count)])
                case 2: line.append(flags[random.below(flags.count)])
                default: line.append(values[random.below(values.count)])
                }
            }
            let (quick, parser) = Self.both(line)
            guard let quick else { continue }
            read += 1
            switch parser {
            case .success(let invocation): #expect(quick == invocation, "\(line): \(quick) vs \(String(describing: invocation))")
            case .failure(let error): Issue.record("\(line): read quickly as \(quick), refused by ArgumentParser: \(error)")
            }
        }
        #expect(read > 150, "only \(read) of 1500 lines read: the test no longer reaches the reader")
    }
}

/// A small seeded generator (SplitMix64), so a failure can be run again.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}
