/// The typed timer request: one parser per kind of value, unknown keys refused, and the
/// same configuration as the text path for every combination tried.
import PropertyBased
import Testing
@testable import StillMomentCore

@Suite("Timer requests")
struct TimerRequestTests {
    static let catalog = Result { try SoundCatalog.load(folder: GuidedTests.sounds) }

    @Test("a misspelt key is refused, naming it")
    func unknownKey() {
        #expect(throws: CoreError.self) { try TimerRequest(text: ["durration": "20m"]) }
        do {
            _ = try TimerRequest(text: ["durration": "20m"])
        } catch {
            #expect(error.description.contains("durration") && error.category == .badInput)
        }
    }

    @Test("each kind of value has its parser: times, off, volumes, counts, modes, intervals, bells")
    func parsers() throws {
        let r = try TimerRequest(text: ["duration": "20m", "preparation": "off", "gong-volume": "0.5", "strikes": "3",
                                        "interval-mode": "before-end", "interval": "5m", "bells": "1m,-2m", "device": "null"])
        #expect(r.duration == 1_200_000 && r.preparation == 0 && r.gongVolume == 0.5 && r.strikes == 3)
        #expect(r.intervalMode == .beforeEnd && r.interval == .every(300_000) && r.device == .null)
        #expect(r.bells == [BellTime(fromEnd: false, milliseconds: 60_000), BellTime(fromEnd: true, milliseconds: 120_000)])
        #expect(try TimerRequest(text: ["interval": "on"]).interval == .on)
        #expect(try TimerRequest(text: ["interval": "off"]).interval == .off)
        for (k, v) in [("gong-volume", "1.01"), ("strikes", "0"), ("interval-mode", "sometimes"), ("device", ""),
                       ("device", "a\u{1B}b"), ("gong", ""), ("bells", "1m,,2m"), ("duration", "1e15")] {
            #expect(throws: CoreError.self, "\(k)=\(v)") { try TimerRequest(text: [k: v]) }
        }
    }

    @Test("the typed request gives the same configuration as the settings-and-options text path")
    func sameAsText() async throws {
        let catalog = try Self.catalog.get()
        let durations = Gen.element(of: ["10s", "20m", "1h", "24h"]).map { $0 ?? "20m" }
        let intervals = Gen.element(of: ["off", "on", "10s", "5m", "2h"]).map { $0 ?? "off" }
        let modes = Gen.element(of: IntervalMode.allCases.map(\.rawValue)).map { $0 ?? "repeating" }
        let ambiences = Gen.element(of: ["silent", "forest", "rain"]).map { $0 ?? "silent" }
        await propertyCheck(count: 200, input: durations, intervals, modes, ambiences) { d, i, m, a in
            let options = ["duration": d, "interval": i, "interval-mode": m, "ambience": a]
            let text = try? TimerConfiguration(settings: Settings(), options: options, catalog: catalog)
            let typed = try? TimerConfiguration(request: TimerRequest(text: options), catalog: catalog)
            #expect(text == typed, "\(options)")
        }
    }
}
