// libFuzzer harness for the schedule's text (Sources/StillMomentCore/Domain/: Schedule.swift,
// LocalTime.swift, ZoneRules.swift, ShellWords.swift, compiled with the Core files they use).
// Any bytes, read as UTF-8 text, go to every reader of schedule text there is:
// - `ScheduleWhen(parsing:)`, the WHEN of `schedule add` (and of a synced or a room's entry):
//   a refusal is one line in both languages; what parses is written back (`description`) and
//   reads as the same value, and the scheduler's arithmetic runs on it (`decide` two days
//   from a fixed now, `next`, `hasPassed`) in UTC and in a zone with summer time;
// - `ShellWords.split`, a line of the timetable file (`schedule import`) and of a button's
//   action: a refusal is one line; every word without control characters is quoted back
//   (`ShellWords.quote`) and the line of quoted words splits into the same words;
// - `PosixRule`, the TZ rule (the `TZ` variable and a TZif file's footer): what parses gives an
//   offset in RFC 8536's range (above -25 h, below 26 h) at instants from 1900 to 2200, and a zone from it converts wall-clock
//   times (`instants`, `localTime`) without trapping;
// - `ZoneRules(tzif:)`, a TZif file as `TZ=/path` or /etc/localtime gives it, the same way;
// - `CivilDate` (quiet days, `upcoming --from`) and `ScheduleWhen.clock`: what parses is
//   written back as the same text.
// Nothing may trap, hang or grow without bound.

@inline(never)
func consume<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

func oneLine(_ error: CoreError) {
    for text in [error.text(.en), error.text(.de)] {
        precondition(!text.contains("\n") && !text.isEmpty, "a refusal that is not one line: \(text.debugDescription)")
    }
}

/// 2026-11-28 12:00 UTC, a Saturday: the scheduler's "now" in this harness.
let now: Int64 = 1_795_867_200
/// Europe/Berlin's rule, as the TZif footer and TZ give it.
let berlin: ZoneRules = {
    guard let rule = PosixRule("CET-1CEST,M3.5.0,M10.5.0/3") else { preconditionFailure("Berlin's rule does not parse") }
    return ZoneRules(name: "CET", transitions: [], initialOffset: rule.standardOffset, footer: rule)
}()
/// Instants between 1900 and 2200 (UTC seconds), where any zone must answer.
let probes: [Int64] = [-2_208_988_800, -1, 0, 1_000_000_000, now, now + 86_400 * 180, 4_102_444_800, 7_258_118_400]

func checkZone(_ zone: ZoneRules) {
    for t in probes {
        let offset = zone.offset(at: t)
        precondition(ZoneRules.offsets.contains(offset), "an offset of \(offset) s at \(t)")
        consume(zone.localTime(t).iso8601)
        consume(zone.instants(local: t))
    }
    consume(ScheduleWhen.instant(CivilDate(year: 2026, month: 3, day: 29), 2 * 3600 + 1800, zone))
}

func checkWhen(_ when: ScheduleWhen) {
    let written = when.description
    do {
        let again = try ScheduleWhen(parsing: written)
        precondition(again == when, "\(written.debugDescription) reads back as \(again)")
    } catch {
        preconditionFailure("\(written.debugDescription), written from \(when), does not read back: \(error)")
    }
    for zone in [ZoneRules.utc, berlin] {
        consume(when.hasPassed(now: now, zone: zone))
        let entry = ScheduleDecision.Entry(id: 1, when: when, enabled: true, lastHandled: now - 2 * 86_400)
        let outcome = ScheduleDecision.decide([entry], now: now, zone: zone, quiet: [CivilDate(year: 2026, month: 11, day: 27)],
                                              seed: { UInt64(bitPattern: $0) })
        for ran in outcome.run { precondition(ran.at <= now && now - ran.at <= ScheduleDecision.lateness, "ran \(ran.at) at \(now)") }
        if let wake = outcome.wake { precondition(wake > now, "wakes at \(wake), not after \(now)") }
        if let next = when.next(after: now, zone: zone, seed: 7) { precondition(next > now, "next \(next) is not after \(now)") }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    let text = String(decoding: bytes, as: UTF8.self)

    // 1. The WHEN of `schedule add`.
    do {
        checkWhen(try ScheduleWhen(parsing: text))
    } catch {
        oneLine(error)
    }

    // 2. A line of the timetable file.
    // What it wrote back must read: a refusal there is a finding, not a refusal.
    do {
        let words = try ShellWords.split(text)
        let plain = words.filter { !$0.unicodeScalars.contains { $0.properties.generalCategory == .control } }
        func again(_ line: String) -> [String] {
            do { return try ShellWords.split(line) } catch { preconditionFailure("\(line.debugDescription), written by quote, is refused: \(error)") }
        }
        for word in plain {
            let back = again(ShellWords.quote(word))
            precondition(back == [word], "\(word.debugDescription) quoted reads back as \(back)")
        }
        let line = plain.map(ShellWords.quote).joined(separator: " ")
        let back = again(line)
        precondition(back == plain, "\(line.debugDescription) reads back as \(back), not \(plain)")
    } catch {
        oneLine(error)
    }

    // 3. A TZ rule.
    if text.utf8.count <= 256, let rule = PosixRule(text) {
        checkZone(ZoneRules(name: text, transitions: [], initialOffset: rule.standardOffset, footer: rule))
    }

    // 4. A TZif file.
    if let zone = ZoneRules(tzif: bytes, name: "fuzz") { checkZone(zone) }

    // 5. A date and a clock time.
    if let date = CivilDate(text) { precondition(date.description == text, "\(text.debugDescription) written back as \(date)") }
    if let s = ScheduleWhen.clock(text) {
        precondition((0..<86_400).contains(s), "\(text.debugDescription) is \(s) s")
        precondition(ScheduleWhen.clock(ScheduleWhen.clockText(s)) == s, "\(s) s written as \(ScheduleWhen.clockText(s))")
    }
    return 0
}
