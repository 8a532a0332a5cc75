/// Presets: saved after checking, overridden per sit, renamed and deleted; a removed
/// custom sound is named when the preset is used.
import Testing
@testable import StillMomentCore

@Suite("Presets")
struct PresetTests {
    @Test("save checks the timer, options override the preset, and the preset overrides the settings")
    func saveAndOverride() throws {
        let home = LibraryTempHome()
        let store = try LibraryStore(home: home.path)
        let presets = PresetStore(store: store)
        let catalog = try SoundCatalog.load(folder: GuidedTests.sounds)
        let morning = try presets.save("Morning", request: try TimerRequest(text: ["duration": "25m", "interval": "5m", "ambience": "forest"]),
                                       catalog: catalog)
        #expect(morning.name == "Morning")
        #expect(throws: CoreError.self) { try presets.save("bad", request: try TimerRequest(text: ["gong": "nosuch"]), catalog: catalog) }
        #expect(throws: CoreError.self) { try presets.save("bad", request: try TimerRequest(text: ["duration": "25h"]), catalog: catalog) }
        #expect(throws: CoreError.self) { try presets.save("-x", request: TimerRequest(), catalog: catalog) }
        #expect(try presets.all().map(\.name) == ["Morning"])

        var settings = Settings()
        try settings.set("gong-volume", "0.5", catalog: catalog)
        try settings.set("duration", "15m", catalog: catalog)
        let found = try #require(try presets.find("morning"), "names are found case-insensitively")
        let c = try TimerConfiguration(settings: settings, preset: found, options: try TimerRequest(text: ["interval": "10m"]),
                                       catalog: catalog)
        #expect(c.duration == 1_500_000, "the preset's duration over the settings'")
        #expect(c.gongVolume == 0.5, "the settings where the preset says nothing")
        #expect(c.intervalTimes == [600_000, 1_200_000], "the sit's option over the preset's")
        #expect(c.ambience?.id == "forest")
    }

    @Test("rename and delete; a preset naming a removed sound says so when used")
    func renameDeleteAndMissingSound() throws {
        let home = LibraryTempHome()
        let store = try LibraryStore(home: home.path)
        let presets = PresetStore(store: store)
        let catalog = try SoundCatalog.load(folder: GuidedTests.sounds)
        _ = try presets.save("a", request: try TimerRequest(text: ["gong": "clear-strike"]), catalog: catalog)
        _ = try presets.save("b", request: TimerRequest(), catalog: catalog)
        #expect(throws: CoreError.self) { try presets.rename("a", to: "B") }
        try presets.rename("a", to: "evening")
        #expect(try presets.all().map(\.name) == ["b", "evening"])
        try presets.delete("b")
        #expect(throws: CoreError.self) { try presets.delete("b") }
        // A catalog without the preset's gong (a custom sound that was removed).
        let evening = try #require(try presets.find("evening"))
        var gone = evening
        gone.request.gong = "my-bell"
        do {
            _ = try TimerConfiguration(settings: Settings(), preset: gone, options: TimerRequest(), catalog: catalog)
            Issue.record("a missing sound was accepted")
        } catch {
            #expect(error.description.contains("preset 'evening'") && error.description.contains("my-bell"), "\(error.description)")
        }
    }
}
