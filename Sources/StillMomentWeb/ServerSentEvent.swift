// The daemon's events as server-sent events: `event: NAME\ndata: JSON\n\n`, the JSON on one
// line (so one data line); the daemon's absence said as a state event with `daemon: false`.
import StillMomentCore
import StillMomentControl

enum ServerSentEvent {
    /// One event of the daemon (`{"event": NAME, "data": …}`) as a chunk of the stream.
    static func chunk(_ m: JSON) -> [UInt8] {
        let name = m["event"]?.string ?? "state"
        var data = m["data"] ?? .null
        if case .object(var o) = data, let daemon = m["daemon"] {
            o["daemon"] = daemon
            data = .object(o)
        }
        return Array("event: \(name)\ndata: \(data.line)\n\n".utf8)
    }

    /// The daemon is not there (or went away): the state is idle.
    static var daemonGone: [UInt8] {
        chunk(.object(["event": .string("state"), "data": JSON(encoding: Status(state: .idle)), "daemon": .bool(false)]))
    }
}
