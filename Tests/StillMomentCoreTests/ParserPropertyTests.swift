/// Property tests for the parsers of user input (times, settings values): no input
/// traps or hangs, every refusal is one line, and what is accepted is in range.
import PropertyBased
import StillMomentAudio
import Testing
@testable import StillMomentCore

@Suite("Parsers under arbitrary input")
struct ParserPropertyTests {
    /// Characters a time is made of, and the ones an attacker adds.
    static let timeAlphabet = Gen.element(of: Array("0123456789012345678901234567890123456789..::hmsHMS e+-xnifa\u{1B}\u{0}٣½"))
        .map { $0 ?? "0" }

    static func isOneLine(_ s: String) -> Bool {
        !s.isEmpty && !s.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }

    @Test("TimeText.parse: any text either parses into 0...1000h or is refused in one line")
    func timeParserTotal() async {
        await propertyCheck(count: 3000, input: Self.timeAlphabet.string(of: 0...30)) { text in
            do throws(TimeText.ParseError) {
                let ms = try TimeText.parse(text)
                #expect(ms >= 0 && ms <= TimeText.maximum, "\(text) gave \(ms)")
            } catch {
                #expect(Self.isOneLine(error.description), "\(error.description)")
            }
            _ = try? TimeText.parseSigned("-" + text)
        }
    }

    @Test("TimeText.parse: huge numbers in every form are refused, never converted")
    func timeParserHugeNumbers() async {
        await propertyCheck(input: Gen.int(in: 7...400), Gen.element(of: ["", "h", "m", "s", ":00", "m30s", ".5"])) { digits, suffix in
            let text = String(repeating: "9", count: digits) + (suffix ?? "")
            #expect(throws: TimeText.ParseError.self) { try TimeText.parse(text) }
        }
        for text in ["1e15", "1e300", "inf", "nan", "0x10", "-5m", "+5m", "99999999999999999:00", "1:99999999999999999999:00"] {
            #expect(throws: TimeText.ParseError.self) { try TimeText.parse(text) }
        }
    }

    @Test("TimeText: compact(ms) parses back to ms for every whole-second time up to the maximum")
    func timeRoundTrip() async {
        await propertyCheck(count: 2000, input: Gen.int(in: 0...Int(TimeText.maximum / 1000))) { seconds in
            let ms = Int64(seconds) * 1000
            #expect((try? TimeText.parse(TimeText.compact(ms))) == ms)
            #expect((try? TimeText.parse(TimeText.clock(ms))) == ms)
        }
    }

    @Test("settings: any value for any key is either stored and valid or refused in one line")
    func settingsValues() async throws {
        let catalog = try SoundCatalog.load(folder: GuidedTests.sounds)
        let keys = Settings.keys
        let values = Gen.oneOf(
            Self.timeAlphabet.string(of: 0...12),
            Gen.element(of: ["off", "on", "0.5", "1.5", "-1", "nan", "1e300", "temple-bell", "forest", "silent",
                             "repeating", "before-end", "after-start", "9", "10", "0", "", "default", "null"]).map { $0 ?? "" })
        await propertyCheck(count: 3000, input: Gen.int(in: 0...(keys.count - 1)), values) { k, value in
            var settings = Settings()
            do throws(CoreError) {
                try settings.set(keys[k], value, catalog: catalog)
                // What was stored makes a valid timer.
                #expect((try? TimerConfiguration(settings: settings, options: [:], catalog: catalog)) != nil)
            } catch {
                #expect(Self.isOneLine(error.description), "\(keys[k])=\(value): \(error.description)")
                #expect(settings == Settings(), "a refused value is not stored")
            }
        }
    }

    @Test("timer options: huge and tiny values are refused, never trap (the socket's case)")
    func timerOptions() throws {
        let catalog = try SoundCatalog.load(folder: GuidedTests.sounds)
        let bad: [(String, String)] = [
            ("duration", "1e15"), ("duration", "99999999999999999:00"), ("duration", "25h"), ("duration", "0.5s"),
            ("preparation", "1e15"), ("preparation", "2h"), ("interval", "1e15"), ("interval", "0.001s"),
            ("interval", "9s"), ("bells", "99999999999999999s"), ("bells", String(repeating: "1m,", count: 9000) + "2m"),
            ("strikes", "99999999999999999999"), ("gong-volume", "1e300"), ("gong-volume", "nan"),
        ]
        for (key, value) in bad {
            #expect(throws: CoreError.self, "\(key)=\(value.prefix(40))") {
                try TimerConfiguration(settings: Settings(), options: [key: value], catalog: catalog)
            }
        }
        // The longest day with the densest gongs stays small: 8,640 gongs at most.
        let c = try TimerConfiguration(settings: Settings(), options: ["duration": "24h", "interval": "10s"], catalog: catalog)
        #expect(c.intervalTimes.count < 8640)
    }
}

@Suite("Error categories")
struct ErrorCategoryTests {
    @Test("every core error has the category that decides its exit code and protocol code")
    func categories() {
        let bad: [CoreError] = [.badValue(option: "--x", reason: .same("r")), .badRequest(.same("r")), .notFound(key: "k", hint: .same("")),
                                .ambiguous(key: "k", matches: []), .unknownSound(id: "i", kind: "gong", valid: [])]
        let failing: [CoreError] = [.io(path: "p", reason: .same("r")), .unplayable(path: "p", reason: .same("r")), .damaged(.same("d")),
                                    .noSpace(path: "p", home: "h", needed: 1, free: 0), .noSounds]
        #expect(bad.allSatisfy { $0.category == .badInput })
        #expect(failing.allSatisfy { $0.category == .failure })
        #expect(CoreError.device(DeviceError(kind: .noDevice, device: "x", message: "m", alsaError: -2)).category == .device)
        for e in bad + failing { #expect(!e.description.contains("\n")) }
    }
}
