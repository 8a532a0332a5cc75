// The CLI's one map from errors to exit codes, and the status lines `status`, `pause` …
// and the live view print, in English and German.
import Testing
@testable import stillmoment
import StillMomentControl
import StillMomentCore

@Suite("Exit codes and status lines")
struct ExitAndStatusTests {
    @Test("every error category and every daemon refusal has its exit code: 2 bad input, 3 device, 1 the rest")
    func exitCodes() {
        #expect(Exit.code(for: ErrorCategory.badInput) == 2)
        #expect(Exit.code(for: ErrorCategory.failure) == 1)
        #expect(Exit.code(for: ErrorCategory.device) == 3)
        for code in ErrorCode.allCases {
            let want: Int32 = switch code {
            case .badArguments, .unknownCommand, .badRequest: 2
            case .device: 3
            default: 1
            }
            #expect(Exit.code(for: code) == want, "\(code.rawValue)")
        }
        // Errors of the core land in their category.
        #expect(Exit.code(for: CoreError.badValue(option: "--duration", reason: .same("x")).category) == 2)
        #expect(Exit.code(for: CoreError.notFound(key: "x", hint: .same("")).category) == 2)
        #expect(Exit.code(for: CoreError.io(path: "/x", reason: .same("disk full")).category) == 1)
        #expect(Exit.code(for: CoreError.damaged(.same("x")).category) == 1)
    }

    static func timer() -> Status {
        var s = Status(state: .running)
        s.session = 4
        s.source = .timer
        s.elapsed = 65_000
        s.remaining = 1_135_000
        s.duration = 1_200_000
        s.nextGong = 300_000
        return s
    }

    static func guided() -> Status {
        var s = Status(state: .playing)
        s.session = 5
        s.source = .guided
        s.meditation = .init(id: "a1", name: "Body Scan", teacher: "Tara")
        s.position = 754_000
        s.duration = 1_800_000
        return s
    }

    @Test("a timer's line: phase, elapsed, left and the next gong; paused says so")
    func timerLine() {
        let line = Language.speaking(.en) { StatusText.summary(Self.timer()) }
        #expect(line.hasPrefix("timer: "), "\(line)")
        #expect(line.contains("01:05") && line.contains("18:55") && line.contains("05:00"), "\(line)")
        var paused = Self.timer()
        paused.paused = true
        #expect(Language.speaking(.en) { StatusText.summary(paused) }.contains("paused"))
        let german = Language.speaking(.de) { StatusText.summary(paused) }
        #expect(german.hasPrefix("Timer: ") && german.contains("pausiert"), "\(german)")
    }

    @Test("a guided meditation's line: teacher, name, position of length; the preparation counts down")
    func guidedLine() {
        let line = Language.speaking(.en) { StatusText.summary(Self.guided()) }
        #expect(line == "playing: Tara – Body Scan  12:34 / 30:00", "\(line)")
        var preparing = Self.guided()
        preparing.state = .preparation
        preparing.startsIn = 8_000
        let prep = Language.speaking(.en) { StatusText.summary(preparing) }
        #expect(prep.hasPrefix("preparing: Tara – Body Scan") && prep.contains("00:08"), "\(prep)")
        let german = Language.speaking(.de) { StatusText.summary(Self.guided()) }
        #expect(german == "Wiedergabe: Tara – Body Scan  12:34 / 30:00", "\(german)")
    }

    @Test("starting, idle and a bell have lines of their own; a name cannot drive the terminal")
    func otherLines() {
        var starting = Status(state: .starting)
        starting.source = .timer
        #expect(Language.speaking(.en) { StatusText.summary(starting) } == "timer: starting")
        #expect(Language.speaking(.de) { StatusText.summary(Status(state: .idle)) } == "nichts läuft")
        var bell = Status(state: .bell)
        bell.source = .bell
        bell.sound = "temple-bell"
        #expect(Language.speaking(.en) { StatusText.summary(bell) } == "bell: temple-bell")
        var hostile = Self.guided()
        hostile.meditation?.name = "Scan\u{1B}[2J"
        let live = Language.speaking(.en) { StatusText.live(hostile, keys: false) }
        #expect(live.contains("Scan"))
        // The live line holds a progress bar and the position; Console strips control characters.
        #expect(live.contains("12:34"), "\(live)")
    }
}
