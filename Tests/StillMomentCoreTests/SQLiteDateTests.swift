// The catalog's dates without ICU (SQLiteDate) against GRDB's own reading and writing.
import Foundation
import GRDB
import Testing
@testable import StillMomentCore

@Suite("Catalog dates")
struct SQLiteDateTests {
    /// Whole milliseconds from 1900 to 2200, leap days and the ends of months included.
    static let samples: [Double] = {
        var g = SystemRandomNumberGenerator()
        var list: [Double] = [0, -1, 951_782_400, 951_868_799.999, 4_102_444_800, -2_208_988_800, 1_764_000_000.5]
        for _ in 0..<2000 { list.append(Double(Int64.random(in: -2_208_988_800_000...7_258_118_400_000, using: &g)) / 1000) }
        return list
    }()

    @Test("written as GRDB writes it, to the millisecond")
    func encodes() throws {
        for t in Self.samples {
            let date = Date(timeIntervalSince1970: t)
            let ours = try #require(SQLiteDate.encode(date)?.databaseValue)
            #expect(ours == date.databaseValue, "\(t): \(ours) vs \(date.databaseValue)")
        }
    }

    @Test("read as GRDB reads it: stored text in its forms, and numbers")
    func decodes() throws {
        for t in Self.samples {
            let text = Date(timeIntervalSince1970: t).databaseValue
            let ours = try #require(SQLiteDate.decode(text))
            let theirs = try #require(Date.fromDatabaseValue(text))
            #expect(abs(ours.timeIntervalSince1970 - theirs.timeIntervalSince1970) < 1e-6, "\(text)")
        }
        for text in ["2026-11-25", "2026-11-25 07:30", "2026-11-25T07:30:15", "2024-02-29 23:59:59.123456"] {
            let ours = try #require(SQLiteDate.decode(text.databaseValue), "\(text)")
            let theirs = try #require(Date.fromDatabaseValue(text.databaseValue))
            #expect(abs(ours.timeIntervalSince1970 - theirs.timeIntervalSince1970) < 1e-6, "\(text)")
        }
        #expect(SQLiteDate.decode(1_764_000_000.databaseValue)?.timeIntervalSince1970 == 1_764_000_000)
        // Not a date of ours: left to GRDB, which says what it says (nil here).
        for text in ["2026-02-30", "2026-13-01", "2026-11-25 24:00", "tomorrow", "2026-11-25 07:30:15.", ""] {
            #expect(SQLiteDate.parse(text) == nil, "\(text)")
        }
    }

    @Test("a meditation's date comes back from the catalog unchanged")
    func roundTrip() throws {
        let db = try DatabaseQueue()
        try db.write { db in
            try db.create(table: "t") { t in t.column("d", .datetime) }
            let date = Date(timeIntervalSince1970: 1_764_054_123.456)
            try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [SQLiteDate.encode(date)?.databaseValue])
            let text = try String.fetchOne(db, sql: "SELECT d FROM t")
            #expect(text == "2025-11-25 07:02:03.456")
        }
    }
}
