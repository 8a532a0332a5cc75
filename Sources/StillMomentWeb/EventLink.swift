// The web app's one subscription to the daemon: open while a browser watches (an event
// stream is connected), closed when none does, so an idle web app costs the daemon
// nothing. Events go to every watching browser as server-sent events.
import Glibc
import Logging
import StillMomentControl
import StillMomentCore

final class EventLink {
    /// How long the HTTP thread waits for the daemon here (it answers status in under a
    /// millisecond when it runs): a daemon held or starting costs at most this, then a retry in 3 s.
    static let patienceMs: Int32 = 40

    private let log: Logger
    private var client: ControlClient?
    /// When to try again to reach a daemon that was not there.
    private(set) var retryAt: Double?
    /// Whether a browser watches.
    var wanted = false

    init(log: Logger) { self.log = log }

    /// The socket to poll (-1: none), connecting or disconnecting as `wanted` says.
    func descriptor(now: Double) -> Int32 {
        if !wanted {
            client = nil
            retryAt = nil
            return -1
        }
        if client == nil, (retryAt ?? 0) <= now {
            do {
                // On the HTTP thread: a daemon that does not answer at once is tried again later.
                let c = try ControlClient.connect(startIfNeeded: false, helloTimeoutMs: Self.patienceMs)
                try c.answer(.subscribe(progress: true), timeoutMs: Self.patienceMs)
                client = c
                retryAt = nil
            } catch {
                retryAt = now + 3
            }
        }
        return client?.descriptor ?? -1
    }

    /// The events that came, as server-sent events.
    func read() -> [[UInt8]] {
        guard let c = client else { return [] }
        do {
            return try c.availableEvents().map(Self.chunk)
        } catch {
            // The daemon went away (an on-demand daemon's idle exit, a restart): say so, try again soon.
            client = nil
            retryAt = WebServer.now() + 1
            log.info("the daemon went away: \(error.description)")
            return [Self.chunk(.object(["event": .string("state"), "data": JSON(encoding: Status(state: .idle)), "daemon": .bool(false)]))]
        }
    }

    /// The status now, as the first event of a new stream.
    func snapshot() -> [UInt8] {
        do {
            let c = try ControlClient.connect(startIfNeeded: false, helloTimeoutMs: Self.patienceMs)
            let status = try c.answer(.status, timeoutMs: Self.patienceMs)
            return Self.chunk(.object(["event": .string("state"), "data": status]))
        } catch {
            return Self.chunk(.object(["event": .string("state"), "data": JSON(encoding: Status(state: .idle)), "daemon": .bool(false)]))
        }
    }

    /// `event: NAME\ndata: JSON\n\n` (JSON on one line, so one data line).
    static func chunk(_ m: JSON) -> [UInt8] {
        let name = m["event"]?.string ?? "state"
        var data = m["data"] ?? .null
        if case .object(var o) = data, let daemon = m["daemon"] {
            o["daemon"] = daemon
            data = .object(o)
        }
        return Array("event: \(name)\ndata: \(data.line)\n\n".utf8)
    }
}
