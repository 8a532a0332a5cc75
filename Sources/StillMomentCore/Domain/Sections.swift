/// Sit-and-walk programs: `--sections "sit 25m, walk 5m, sit 25m"`. The session is the
/// sequence; its length is the sum. Pure values, no audio.
public struct Section: Sendable, Equatable, Codable {
    public enum Kind: String, Sendable, Codable, CaseIterable { case sit, walk }
    public var kind: Kind
    public var milliseconds: Int64

    public init(_ kind: Kind, _ milliseconds: Int64) {
        self.kind = kind
        self.milliseconds = milliseconds
    }
}

public struct Sections: Sendable, Equatable, Codable, CustomStringConvertible {
    public var list: [Section]

    /// At most this many sections (a whole retreat day fits).
    public static let maxCount = 64
    /// No section shorter than this.
    public static let minSection: Int64 = 10_000

    public init(_ list: [Section]) { self.list = list }

    /// Reads `sit 25m, walk 5m, sit 25m` (German `sitzen`/`gehen` too).
    public init(parsing text: String) throws(CoreError) {
        let items = text.split(separator: ",", omittingEmptySubsequences: false).map { String($0).trimmingWhitespace() }
        guard text.utf8.count <= 2000, items.count <= Self.maxCount else {
            throw CoreError.badValue(option: "--sections", reason: both("more than \(Self.maxCount) sections", "mehr als \(Self.maxCount) Abschnitte"))
        }
        var list: [Section] = []
        for item in items {
            let words = item.split(whereSeparator: { $0.isWhitespace })
            guard words.count == 2 else {
                throw CoreError.badValue(option: "--sections", reason: both("'\(item)' is not a section: write it like sit 25m or walk 5m", "'\(item)' ist kein Abschnitt: schreib ihn wie sit 25m oder walk 5m"))
            }
            let kinds: [String: Section.Kind] = ["sit": .sit, "walk": .walk, "sitzen": .sit, "gehen": .walk]
            guard let kind = kinds[words[0].lowercased()] else {
                throw CoreError.badValue(option: "--sections", reason: both("'\(words[0])' is not sit or walk", "'\(words[0])' ist weder sit noch walk"))
            }
            let ms: Int64
            do { ms = try TimeText.parse(String(words[1])) } catch {
                throw CoreError.badValue(option: "--sections", reason: .rendering { error.description })
            }
            guard ms >= Self.minSection else {
                throw CoreError.badValue(option: "--sections", reason: both("'\(item)' is shorter than 10 s", "'\(item)' ist kürzer als 10 s"))
            }
            list.append(Section(kind, ms))
        }
        guard list.contains(where: { $0.kind == .sit }) else {
            throw CoreError.badValue(option: "--sections", reason: both("there is no sit section", "es gibt keinen Sitz-Abschnitt"))
        }
        self.list = list
        guard total <= TimerConfiguration.maxDuration else {
            throw CoreError.badValue(option: "--sections", reason: both("together longer than 24 h", "zusammen länger als 24 h"))
        }
    }

    public var total: Int64 { list.reduce(0) { $0 + $1.milliseconds } }

    /// Where each section starts (ms from the start gong).
    public var starts: [Int64] {
        var t: Int64 = 0
        return list.map { s in
            defer { t += s.milliseconds }
            return t
        }
    }

    /// The sit sections as [start, end) ranges.
    public var sitRanges: [Range<Int64>] {
        zip(starts, list).compactMap { start, s in s.kind == .sit ? start..<(start + s.milliseconds) : nil }
    }

    /// The section at `ms` (its index, kind, and time left in it).
    public func section(at ms: Int64) -> (index: Int, kind: Section.Kind, remaining: Int64)? {
        for (i, (start, s)) in zip(starts, list).enumerated() where ms >= start && ms < start + s.milliseconds {
            return (i, s.kind, start + s.milliseconds - ms)
        }
        return nil
    }

    public var description: String {
        list.map { "\($0.kind.rawValue) \(TimeText.compact($0.milliseconds))" }.joined(separator: ", ")
    }
}

/// A small, seedable generator (SplitMix64): the same seed gives the same bells on every
/// machine and every version.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// `--random-bells MIN-MAX`: bells at random spacings between MIN and MAX within each
/// sit section, none in its first MIN or its last 30 s.
public struct RandomBells: Sendable, Equatable, Codable {
    public var minimum: Int64
    public var maximum: Int64
    public static let quietEnd: Int64 = 30_000

    public init(minimum: Int64, maximum: Int64) {
        self.minimum = minimum
        self.maximum = maximum
    }

    /// Reads `3m-10m`.
    public init(parsing text: String) throws(CoreError) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw CoreError.badValue(option: "--random-bells", reason: both("'\(text)' is not a range like 3m-10m", "'\(text)' ist kein Bereich wie 3m-10m"))
        }
        let lo: Int64, hi: Int64
        do {
            lo = try TimeText.parse(String(parts[0]))
            hi = try TimeText.parse(String(parts[1]))
        } catch {
            throw CoreError.badValue(option: "--random-bells", reason: .rendering { error.description })
        }
        guard lo >= TimerConfiguration.minInterval, hi >= lo else {
            throw CoreError.badValue(option: "--random-bells", reason: both("'\(text)': the shortest spacing is 10 s and MIN is at most MAX", "'\(text)': der kürzeste Abstand ist 10 s, und MIN ist höchstens MAX"))
        }
        self.init(minimum: lo, maximum: hi)
    }

    /// The bells (ms from the start gong) within `ranges`, drawn with `generator`.
    public func times(in ranges: [Range<Int64>], using generator: inout some RandomNumberGenerator) -> [Int64] {
        var out: [Int64] = []
        for r in ranges {
            let last = r.upperBound - Self.quietEnd
            var t = r.lowerBound
            while true {
                t += Int64.random(in: minimum...maximum, using: &generator)
                guard t <= last else { break }
                out.append(t)
            }
        }
        return out
    }
}
