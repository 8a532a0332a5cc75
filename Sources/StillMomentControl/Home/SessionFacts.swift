// What a hook is told about a session, as environment variables: made once from the
// runner's SessionRecord (at the start: what was asked; at the end: what was heard and why
// it ended), so every hook sees the same facts the practice log keeps.
import FoundationEssentials
import StillMomentCore

public enum SessionFacts {
    /// `STILLMOMENT_EVENT`, `_KIND`, `_NAME`, `_PRESET`, `_MEDITATION_ID`, `_TEACHER`,
    /// `_SESSION_ID`, `_START` (Unix seconds), `_PLANNED_SECONDS`, `_SCHEDULED` (0/1), and at
    /// the end `_HEARD_SECONDS` and `_END_REASON`. Absent facts are absent variables.
    public static func environment(_ record: SessionRecord, when: Hook.When) -> [String: String] {
        var env: [String: String] = [
            "STILLMOMENT_EVENT": when.rawValue,
            "STILLMOMENT_KIND": record.kind.rawValue,
            "STILLMOMENT_NAME": Display.clean(record.preset ?? record.summary),
            "STILLMOMENT_SESSION_ID": record.id,
            "STILLMOMENT_START": String(Int64(record.start.timeIntervalSince1970)),
            "STILLMOMENT_PLANNED_SECONDS": String(record.plannedMilliseconds / 1000),
            "STILLMOMENT_SCHEDULED": record.scheduled ? "1" : "0",
        ]
        if let preset = record.preset { env["STILLMOMENT_PRESET"] = Display.clean(preset) }
        if let id = record.meditationID { env["STILLMOMENT_MEDITATION_ID"] = id }
        if let teacher = record.teacher { env["STILLMOMENT_TEACHER"] = Display.clean(teacher) }
        if when == .onEnd {
            env["STILLMOMENT_HEARD_SECONDS"] = String(record.heardMilliseconds / 1000)
            env["STILLMOMENT_END_REASON"] = record.endReason.name
        }
        return env
    }
}
