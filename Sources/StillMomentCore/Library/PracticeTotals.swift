/// The practice log's statistics kept by SQLite itself, so `stats` and the web app answer
/// in milliseconds whatever the size of the log: three small tables of totals (per local
/// day, per preset, per teacher) that triggers on `practice` keep up to date on every
/// insert, update and delete, and an index on the heard length for the longest sit. The
/// numbers are then made by the pure `PracticeStats(days:…)` from those bounded totals.
///
/// Which rows count is the rule `PracticeLog.entry` applies when it reads a row: ended
/// (`endReason` set), a kind of ours, an offset within ±18 h. The local day is the one the
/// sit started on, with its stored offset (floor division, also before 1970).
import GRDB

enum PracticeTotals {
    /// `r`'s row counts (r: `NEW`, `OLD` or the table's name).
    static func counts(_ r: String) -> String {
        let kinds = SessionKind.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        return "(\(r).endReason IS NOT NULL AND \(r).kind IN (\(kinds)) AND abs(\(r).utcOffset) <= 64800)"
    }

    /// `r`'s local day, in days since 1970-01-01.
    static func localDay(_ r: String) -> String {
        let local = "(\(r).startUnix + \(r).utcOffset)"
        return "((\(local) - ((\(local) % 86400) + 86400) % 86400) / 86400)"
    }

    static func add(_ r: String) -> String {
        """
        INSERT INTO practiceDay (day, sits, milliseconds) SELECT \(localDay(r)), 1, \(r).heard WHERE \(counts(r))
            ON CONFLICT (day) DO UPDATE SET sits = sits + 1, milliseconds = milliseconds + excluded.milliseconds;
        INSERT INTO practicePreset (preset, sits, milliseconds) SELECT \(r).preset, 1, \(r).heard
            WHERE \(counts(r)) AND \(r).preset IS NOT NULL
            ON CONFLICT (preset) DO UPDATE SET sits = sits + 1, milliseconds = milliseconds + excluded.milliseconds;
        INSERT INTO practiceTeacher (teacher, sits, milliseconds) SELECT \(r).teacher, 1, \(r).heard
            WHERE \(counts(r)) AND \(r).teacher IS NOT NULL AND \(r).teacher <> ''
            ON CONFLICT (teacher) DO UPDATE SET sits = sits + 1, milliseconds = milliseconds + excluded.milliseconds;
        """
    }

    static func remove(_ r: String) -> String {
        """
        UPDATE practiceDay SET sits = sits - 1, milliseconds = milliseconds - \(r).heard
            WHERE day = \(localDay(r)) AND \(counts(r));
        DELETE FROM practiceDay WHERE day = \(localDay(r)) AND sits <= 0;
        UPDATE practicePreset SET sits = sits - 1, milliseconds = milliseconds - \(r).heard
            WHERE preset = \(r).preset AND \(counts(r));
        DELETE FROM practicePreset WHERE preset = \(r).preset AND sits <= 0;
        UPDATE practiceTeacher SET sits = sits - 1, milliseconds = milliseconds - \(r).heard
            WHERE teacher = \(r).teacher AND \(r).teacher <> '' AND \(counts(r));
        DELETE FROM practiceTeacher WHERE teacher = \(r).teacher AND sits <= 0;
        """
    }

    /// The migration: tables, triggers, indexes, and the totals of the rows already there.
    static func create(_ db: Database) throws {
        for (table, key) in [("practiceDay", "day INTEGER PRIMARY KEY"), ("practicePreset", "preset TEXT NOT NULL PRIMARY KEY"),
                             ("practiceTeacher", "teacher TEXT NOT NULL PRIMARY KEY")] {
            try db.execute(sql: "CREATE TABLE \(table) (\(key), sits INTEGER NOT NULL, milliseconds INTEGER NOT NULL)")
        }
        try db.execute(sql: """
            CREATE TRIGGER practiceTotalsInsert AFTER INSERT ON practice BEGIN \(add("NEW")) END;
            CREATE TRIGGER practiceTotalsDelete AFTER DELETE ON practice BEGIN \(remove("OLD")) END;
            CREATE TRIGGER practiceTotalsUpdate AFTER UPDATE OF kind, preset, teacher, startUnix, utcOffset, heard, endReason
                ON practice BEGIN \(remove("OLD")) \(add("NEW")) END;
            CREATE INDEX practiceOrder ON practice (startUnix, id);
            CREATE INDEX practiceHeard ON practice (heard) WHERE \(counts("practice"));
            INSERT INTO practiceDay (day, sits, milliseconds)
                SELECT \(localDay("practice")), count(*), sum(heard) FROM practice WHERE \(counts("practice")) GROUP BY 1;
            INSERT INTO practicePreset (preset, sits, milliseconds)
                SELECT preset, count(*), sum(heard) FROM practice WHERE \(counts("practice")) AND preset IS NOT NULL GROUP BY preset;
            INSERT INTO practiceTeacher (teacher, sits, milliseconds)
                SELECT teacher, count(*), sum(heard) FROM practice
                WHERE \(counts("practice")) AND teacher IS NOT NULL AND teacher <> '' GROUP BY teacher;
            """)
    }

    /// The numbers as `PracticeStats(entries, today:)` makes them from every entry.
    static func stats(_ db: Database, today: CivilDate) throws -> PracticeStats {
        let days = try Row.fetchAll(db, sql: "SELECT day, sits, milliseconds FROM practiceDay").map { row in
            PracticeStats.DayTotal(day: row[0], sits: row[1], milliseconds: row[2])
        }
        func totals(_ table: String, _ key: String) throws -> [(String, PracticeStats.Total)] {
            try Row.fetchAll(db, sql: "SELECT \(key), sits, milliseconds FROM \(table)").map { row in
                (row[0], PracticeStats.Total(sits: row[1], milliseconds: row[2]))
            }
        }
        let longest = try Int64.fetchOne(db, sql: "SELECT max(heard) FROM practice WHERE \(counts("practice"))") ?? 0
        return PracticeStats(days: days, byPreset: try totals("practicePreset", "preset"),
                             byTeacher: try totals("practiceTeacher", "teacher"), longest: longest, today: today)
    }
}
