/// When interval gongs sound, as pure functions of the session (no I/O, no audio).
/// All times are milliseconds from the start of the meditation (the start gong).
public enum IntervalMode: String, CaseIterable, Sendable, Codable {
    case repeating
    case afterStart = "after-start"
    case beforeEnd = "before-end"
}

public enum GongSchedule {
    /// No gong in the last 5 s of the meditation (it would run into the end gong).
    public static let quietTail: Int64 = 5_000
    /// Strikes of the start and end gong follow each other this far apart.
    public static let strikeSpacing: Int64 = 4_000
    /// The most bells `--bells` takes.
    public static let maxBells = 8_640

    public struct BellError: Error, Equatable, Sendable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    /// Interval gongs: `repeating` at N, 2N, …; `afterStart` once at N; `beforeEnd` once
    /// when N remain. None when N ≥ the duration; none in the last 5 s.
    public static func intervalTimes(duration: Int64, interval: Int64, mode: IntervalMode) -> [Int64] {
        guard interval > 0, interval < duration else { return [] }
        let candidates: [Int64]
        switch mode {
        case .repeating:
            candidates = Array(stride(from: interval, to: duration, by: Int(interval)))
        case .afterStart:
            candidates = [interval]
        case .beforeEnd:
            candidates = [duration - interval]
        }
        return candidates.filter { $0 > 0 && $0 <= duration - quietTail }
    }

    /// Bells at given times (`5m,12m30s,-2m`): a negative time counts back from the end.
    /// Times must fall inside the meditation and outside its last 5 s, and no time may
    /// be given twice. The result is sorted.
    public static func bellTimes(_ list: String, duration: Int64) throws(BellError) -> [Int64] {
        // As many as interval gongs every 10 s over 24 h could give: no more.
        guard list.utf8.count <= 200_000, list.utf8.reduce(0, { $0 + ($1 == 44 ? 1 : 0) }) < maxBells else {
            throw BellError(message: tr("--bells: more than \(maxBells) times", "--bells: mehr als \(maxBells) Zeiten"))
        }
        var times: [Int64] = []
        var seen: [Int64: String] = [:]
        for item in list.split(separator: ",", omittingEmptySubsequences: false).map({ String($0).trimmingWhitespace() }) {
            guard !item.isEmpty else { throw BellError(message: "--bells: an empty time in '\(list)'") }
            let parsed: (fromEnd: Bool, ms: Int64)
            do { parsed = try TimeText.parseSigned(item) } catch {
                throw BellError(message: "--bells: \(error.description)")
            }
            let t = parsed.fromEnd ? duration - parsed.ms : parsed.ms
            if t <= 0 || t >= duration {
                throw BellError(message: "--bells: \(item) is outside the \(TimeText.compact(duration)) meditation")
            }
            if t > duration - quietTail {
                throw BellError(message: "--bells: \(item) falls in the last 5 s, where the end gong sounds")
            }
            if let other = seen[t] {
                throw BellError(message: "--bells: \(item) is the same time as \(other)")
            }
            seen[t] = item
            times.append(t)
        }
        guard !times.isEmpty else { throw BellError(message: tr("--bells: no times given", "--bells: keine Zeiten angegeben")) }
        return times.sorted()
    }

    /// Bells at typed times (a parsed `--bells`): the same rules as the text form.
    public static func bellTimes(_ bells: [BellTime], duration: Int64) throws(BellError) -> [Int64] {
        guard !bells.isEmpty else { throw BellError(message: tr("--bells: no times given", "--bells: keine Zeiten angegeben")) }
        guard bells.count <= maxBells else { throw BellError(message: tr("--bells: more than \(maxBells) times", "--bells: mehr als \(maxBells) Zeiten")) }
        var times: [Int64] = []
        var seen: [Int64: String] = [:]
        for b in bells {
            let shown = (b.fromEnd ? "-" : "") + TimeText.compact(b.milliseconds)
            guard b.milliseconds >= 0, b.milliseconds <= TimeText.maximum else {
                throw BellError(message: tr("--bells: \(shown) is outside the \(TimeText.compact(duration)) meditation", "--bells: \(shown) liegt außerhalb der Meditation von \(TimeText.compact(duration))"))
            }
            let t = b.fromEnd ? duration - b.milliseconds : b.milliseconds
            if t <= 0 || t >= duration {
                throw BellError(message: tr("--bells: \(shown) is outside the \(TimeText.compact(duration)) meditation", "--bells: \(shown) liegt außerhalb der Meditation von \(TimeText.compact(duration))"))
            }
            if t > duration - quietTail {
                throw BellError(message: tr("--bells: \(shown) falls in the last 5 s, where the end gong sounds", "--bells: \(shown) fällt in die letzten 5 s, wo der Schlussgong klingt"))
            }
            if let other = seen[t] { throw BellError(message: tr("--bells: \(shown) is the same time as \(other)", "--bells: \(shown) ist dieselbe Zeit wie \(other)")) }
            seen[t] = shown
            times.append(t)
        }
        return times.sorted()
    }

    /// Offsets of the strikes of a gong struck `strikes` times.
    public static func strikeOffsets(strikes: Int) -> [Int64] {
        (0..<max(1, strikes)).map { Int64($0) * strikeSpacing }
    }
}
