/// A hybrid logical clock (Kulkarni, Demirbas et al., "Logical Physical Clocks", 2014): the
/// stamp every synced change carries. It follows the wall clock in milliseconds, but never
/// goes back, and a counter orders what happens within one millisecond; the node id breaks
/// the last tie, so two stamps are never equal for different changes. A device whose clock
/// is fast does not win every conflict for ever: the others' clocks move up to its stamps as
/// they hear them, and a stamp more than `maximumAhead` past this node's wall clock is
/// refused (a clock 10 minutes fast is a clock to set, not a winner).
public struct HybridTimestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Wall-clock milliseconds since 1970 (the larger of the clock's and any stamp heard).
    public let milliseconds: Int64
    /// Orders stamps within one millisecond.
    public let counter: Int
    /// The node that made it (a lower-case UUID).
    public let node: String

    public static let counterLimit = 99_999
    /// The latest millisecond a stamp may name: year 9999.
    public static let millisecondsLimit: Int64 = 253_402_300_799_999

    public init?(milliseconds: Int64, counter: Int, node: String) {
        guard (0...Self.millisecondsLimit).contains(milliseconds), (0...Self.counterLimit).contains(counter),
              Self.isNodeID(node) else { return nil }
        self.init(checked: milliseconds, counter, node)
    }

    /// Values already in range (the clock's own arithmetic, which clamps them).
    fileprivate init(checked milliseconds: Int64, _ counter: Int, _ node: String) {
        self.milliseconds = milliseconds
        self.counter = counter
        self.node = node
    }

    /// The wire form, `MMMMMMMMMMMMMMM-CCCCC-NODE`: fixed widths, so that two texts order as
    /// their stamps do (what SQLite compares).
    public var description: String {
        let ms = String(milliseconds), c = String(counter)
        return String(repeating: "0", count: 15 - ms.count) + ms + "-" + String(repeating: "0", count: 5 - c.count) + c + "-" + node
    }

    /// Reads the wire form strictly (exact widths, digits only, a node id).
    public init?(text: String) {
        let u = Array(text.utf8)
        guard u.count == 15 + 1 + 5 + 1 + 36, u[15] == UInt8(ascii: "-"), u[21] == UInt8(ascii: "-") else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var v: Int64 = 0
            for b in u[range] {
                guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
                v = v * 10 + Int64(b - UInt8(ascii: "0"))
            }
            return v
        }
        guard let ms = number(0..<15), let c = number(16..<21) else { return nil }
        self.init(milliseconds: ms, counter: Int(c), node: String(decoding: u[22...], as: UTF8.self))
    }

    public static func < (a: Self, b: Self) -> Bool {
        (a.milliseconds, a.counter, a.node) < (b.milliseconds, b.counter, b.node)
    }

    /// A node id: a lower-case UUID (8-4-4-4-12 hex digits).
    public static func isNodeID(_ s: String) -> Bool { StoredName.isUUID(Substring(s)) }
}

/// One node's clock: the last stamp it made or heard. Pure: the wall clock is passed in.
public struct HybridClock: Sendable, Equatable {
    public private(set) var last: HybridTimestamp
    public let node: String
    /// How far past this node's wall clock a stamp heard may be: 5 minutes.
    public static let maximumAhead: Int64 = 300_000

    public init(node: String, last: HybridTimestamp? = nil) {
        self.node = node
        self.last = last ?? HybridTimestamp(checked: 0, 0, node)
    }

    /// The stamp for a change made here now (`wall`: this node's wall clock in ms).
    public mutating func tick(wall: Int64) -> HybridTimestamp {
        let wall = min(max(0, wall), HybridTimestamp.millisecondsLimit)
        var ms = max(last.milliseconds, wall)
        var counter = ms == last.milliseconds ? last.counter + 1 : 0
        if counter > HybridTimestamp.counterLimit {
            // 100,000 changes in one millisecond: the clock steps a millisecond ahead.
            ms += 1
            counter = 0
        }
        last = HybridTimestamp(checked: min(ms, HybridTimestamp.millisecondsLimit), counter, node)
        return last
    }

    /// Takes in a stamp heard from a peer: this clock moves past it. A stamp more than
    /// `maximumAhead` past `wall` is refused and leaves the clock as it was.
    public mutating func receive(_ stamp: HybridTimestamp, wall: Int64) throws(SyncError) {
        guard stamp.milliseconds <= wall + Self.maximumAhead else {
            throw .clockAhead(node: stamp.node, milliseconds: stamp.milliseconds - wall)
        }
        let wall = min(max(0, wall), HybridTimestamp.millisecondsLimit)
        var ms = max(last.milliseconds, stamp.milliseconds, wall)
        var counter: Int
        if ms == last.milliseconds && ms == stamp.milliseconds { counter = max(last.counter, stamp.counter) + 1 }
        else if ms == last.milliseconds { counter = last.counter + 1 }
        else if ms == stamp.milliseconds { counter = stamp.counter + 1 }
        else { counter = 0 }
        if counter > HybridTimestamp.counterLimit {
            ms += 1
            counter = 0
        }
        last = HybridTimestamp(checked: min(ms, HybridTimestamp.millisecondsLimit), counter, node)
    }
}
