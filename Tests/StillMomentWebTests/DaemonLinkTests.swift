// The web app's one connection to the daemon, in process, against a scripted daemon on a
// socketpair: many requests in flight on one connection answered out of order, a request
// the daemon never answers timed out alone, events fanned out from one subscription, a
// daemon that goes away reconnected to with its events resumed, no daemon answered at once,
// and an unused connection closed.
import Foundation
import Glibc
import Logging
import StillMomentControl
import StillMomentCore
import Synchronization
import Testing
@testable import StillMomentWeb

/// A scripted daemon: the far end of one socketpair, served on a thread of its own.
final class ScriptedDaemon: Sendable {
    let fd: Int32
    private let received = Mutex<[JSON]>([])
    private let closedByPeer = Mutex(false)

    /// `script` gets each request and the daemon; it answers (or not) through `send`.
    init(fd: Int32, script: @escaping @Sendable (JSON, ScriptedDaemon) -> Void) {
        self.fd = fd
        Thread {
            var framer = LineFramer(limit: 1 << 20)
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n <= 0 { break }
                for item in framer.feed(buffer[0..<n]) {
                    guard case .line(let line) = item, let m = try? JSONParser.parse(line) else { continue }
                    self.received.withLock { $0.append(m) }
                    script(m, self)
                }
            }
            self.closedByPeer.withLock { $0 = true }
        }.start()
    }

    func send(_ m: JSON) {
        let bytes = Array((m.line + "\n").utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    func answer(_ request: JSON, _ result: JSON) {
        send(.object(["id": request["id"] ?? .null, "result": result]))
    }

    func event(_ name: String, _ data: JSON) { send(.object(["event": .string(name), "data": data])) }

    /// Goes away (as a killed daemon does).
    func hangUp() { shutdown(fd, Int32(SHUT_RDWR)) }

    var requests: [JSON] { received.withLock { $0 } }
    var linkClosed: Bool { closedByPeer.withLock { $0 } }
}

/// Connections the link made, each to a new scripted daemon.
final class ScriptedDaemons: Sendable {
    private let list = Mutex<[ScriptedDaemon]>([])
    private let script: @Sendable (JSON, ScriptedDaemon) -> Void
    init(_ script: @escaping @Sendable (JSON, ScriptedDaemon) -> Void) { self.script = script }

    var connector: DaemonLink.Connector {
        { _ throws(ControlError) -> Int32 in
            var fds: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw ControlError.io("socketpair") }
            self.list.withLock { $0.append(ScriptedDaemon(fd: fds[1], script: self.script)) }
            return fds[0]
        }
    }

    var all: [ScriptedDaemon] { list.withLock { $0 } }
}

/// Answers as they come to a test, with when they came.
final class Answers: Sendable {
    private let list = Mutex<[(n: Int, result: Result<JSON, ControlError>, at: Double)]>([])
    func add(_ n: Int, _ r: Result<JSON, ControlError>) { list.withLock { $0.append((n, r, Date().timeIntervalSince1970)) } }
    var all: [(n: Int, result: Result<JSON, ControlError>, at: Double)] { list.withLock { $0 } }
}

func waitUntil(_ seconds: Double, _ condition: () -> Bool) -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if condition() { return true }
        usleep(5000)
    }
    return condition()
}

@Suite("The daemon link")
struct DaemonLinkTests {
    static let log = Logger(label: "test")

    @Test("ten requests in flight at once on one connection, answered in reverse order, each gets its own answer")
    func multiplexed() throws {
        let daemons = ScriptedDaemons { m, d in
            // Nothing is answered until all ten are in: they are in flight together.
            guard d.requests.count == 10 else { return }
            for r in d.requests.reversed() { d.answer(r, .object(["n": r["args"]?["by"] ?? .null])) }
        }
        let link = DaemonLink(log: Self.log, connector: daemons.connector) {}
        defer { link.stop() }
        let answers = Answers()
        for n in 0..<10 {
            link.send(.seek(.by(Int64(n)))) { answers.add(n, $0) }
        }
        #expect(waitUntil(5) { answers.all.count == 10 })
        for a in answers.all {
            guard case .success(let json) = a.result else { Issue.record("request \(a.n): \(a.result)"); continue }
            #expect(json["n"] == .number(Double(a.n)))
        }
        #expect(answers.all.map(\.n) == Array((0..<10).reversed()), "answered as the daemon answered, not in order of asking")
        #expect(link.connectionCount == 1 && daemons.all.count == 1)
        #expect(Set(daemons.all[0].requests.compactMap { $0["id"]?.number }).count == 10, "ten ids")
    }

    @Test("a request the daemon does not answer times out alone, by its own deadline; the others are answered at once")
    func timeoutPerRequest() throws {
        let daemons = ScriptedDaemons { m, d in
            if m["args"]?["by"] != .number(0) { d.answer(m, .object([:])) }
        }
        let link = DaemonLink(log: Self.log, connector: daemons.connector) {}
        defer { link.stop() }
        let answers = Answers()
        let t0 = Date().timeIntervalSince1970
        link.send(.seek(.by(0)), timeout: 0.3) { answers.add(0, $0) }
        for n in 1...3 { link.send(.seek(.by(Int64(n))), timeout: 0.3) { answers.add(n, $0) } }
        #expect(waitUntil(3) { answers.all.count == 4 })
        let byN = Dictionary(answers.all.map { ($0.n, $0) }, uniquingKeysWith: { a, _ in a })
        for n in 1...3 {
            if case .success = byN[n]?.result {} else { Issue.record("request \(n): \(String(describing: byN[n]?.result))") }
            #expect((byN[n]?.at ?? 99) - t0 < 0.25)
        }
        if case .failure(.lost) = byN[0]?.result {} else { Issue.record("the unanswered one: \(String(describing: byN[0]?.result))") }
        let waited = (byN[0]?.at ?? 0) - t0
        #expect(waited >= 0.29 && waited < 1.0, "timed out after \(waited) s")
        #expect(link.connectionCount == 1)
    }

    @Test("events come from one subscription; the daemon gone, the streams hear it; reconnected, events resume")
    func reconnect() throws {
        let daemons = ScriptedDaemons { m, d in
            if m["command"] == .string("subscribe") {
                d.answer(m, .object(["state": .string("running")]))
                d.event("progress", .object(["remaining": .number(Double(9 - d.requests.count))]))
            } else {
                d.answer(m, .object(["state": .string("running")]))
            }
        }
        let woken = Mutex(0)
        let link = DaemonLink(log: Self.log, connector: daemons.connector) { woken.withLock { $0 += 1 } }
        defer { link.stop() }
        link.watch(true)
        var events: [JSON] = []
        #expect(waitUntil(3) { events += link.takeEvents(); return events.count >= 2 })
        #expect(events.first?["event"] == .string("state") && events.first?["data"]?["state"] == .string("running"))
        #expect(events.last?["event"] == .string("progress"))
        #expect(woken.withLock { $0 } >= 1)
        // The daemon goes away (killed, restarting): the streams are told; the link comes back by itself.
        daemons.all[0].hangUp()
        events = []
        #expect(waitUntil(5) { events += link.takeEvents(); return events.contains { $0["event"] == .string("progress") } })
        #expect(events.first?["daemon"] == .bool(false) && events.first?["data"]?["state"] == .string("idle"), "\(events)")
        #expect(link.connectionCount == 2 && daemons.all.count == 2)
        #expect(daemons.all[1].requests.first?["command"] == .string("subscribe"), "subscribed again")
        // Requests go over the new connection.
        let answers = Answers()
        link.send(.status) { answers.add(1, $0) }
        #expect(waitUntil(3) { answers.all.count == 1 })
        if case .success = answers.all.first?.result {} else { Issue.record("\(String(describing: answers.all.first))") }
        #expect(link.connectionCount == 2)
    }

    @Test("no daemon: a request is answered at once that there is none, and nothing waits")
    func noDaemon() throws {
        let link = DaemonLink(log: Self.log, connector: { _ throws(ControlError) -> Int32 in throw ControlError.noDaemon }) {}
        defer { link.stop() }
        let answers = Answers()
        let t0 = Date().timeIntervalSince1970
        link.send(.status) { answers.add(0, $0) }
        #expect(waitUntil(2) { answers.all.count == 1 })
        if case .failure(.noDaemon) = answers.all.first?.result {} else { Issue.record("\(String(describing: answers.all.first))") }
        #expect((answers.all.first?.at ?? 99) - t0 < 0.1)
        #expect(link.health == .absent)
    }

    @Test("an unused connection is closed after the linger; a request later connects again")
    func linger() throws {
        let daemons = ScriptedDaemons { m, d in d.answer(m, .object([:])) }
        let link = DaemonLink(log: Self.log, linger: 0.2, connector: daemons.connector) {}
        defer { link.stop() }
        let answers = Answers()
        link.send(.status) { answers.add(0, $0) }
        #expect(waitUntil(2) { answers.all.count == 1 })
        #expect(waitUntil(2) { daemons.all.first?.linkClosed == true }, "closed once unused")
        link.send(.status) { answers.add(1, $0) }
        #expect(waitUntil(2) { answers.all.count == 2 })
        #expect(link.connectionCount == 2)
    }

    @Test("a status unanswered for the patience marks the daemon stalled (the next status is said at once); answered, it is not")
    func stalled() throws {
        let hold = Mutex(true)
        let daemons = ScriptedDaemons { m, d in if !hold.withLock({ $0 }) { d.answer(m, .object([:])) } }
        let link = DaemonLink(log: Self.log, connector: daemons.connector) {}
        defer { link.stop() }
        let answers = Answers()
        link.send(.status) { answers.add(0, $0) }
        #expect(waitUntil(2) { link.stalled(patience: 0.04) })
        #expect(!link.stalled(patience: 2))
        hold.withLock { $0 = false }
        link.send(.status) { answers.add(1, $0) }
        #expect(waitUntil(2) { answers.all.contains { $0.n == 1 } })
        #expect(link.stalled(patience: 0.04), "the first is still unanswered")
        #expect(waitUntil(6) { answers.all.count == 2 } && !link.stalled(patience: 0.04), "timed out, nothing waits any more")
    }

    @Test("the web API's answers: a daemon's refusal by its HTTP status, a late status says so at once")
    func answers() {
        let late = WebAPI.late(.status, health: .connected)
        #expect(late.status == 200 && String(decoding: late.body, as: UTF8.self).contains("not answering"))
        #expect(String(decoding: WebAPI.late(.status, health: .starting).body, as: UTF8.self).contains("starting"))
        #expect(WebAPI.late(.pause, health: .connected).status == 504)
        #expect(WebAPI.answer(.seek, .failure(.refused(code: .noSession, words: .same("x")))).status == 409)
        #expect(WebAPI.answer(.timer, .failure(.refused(code: .badArguments, words: .same("x")))).status == 422)
        // The daemon's words are said in the browser's language (the web app's hello named its own).
        let refused = ControlError.refused(code: .noSession, words: both("nothing is playing", "nichts spielt"))
        #expect(String(decoding: Language.speaking(.de) { WebAPI.answer(.pause, .failure(refused)) }.body, as: UTF8.self).contains("nichts spielt"))
        #expect(String(decoding: Language.speaking(.en) { WebAPI.answer(.pause, .failure(refused)) }.body, as: UTF8.self).contains("nothing is playing"))
        #expect(WebAPI.answer(.status, .failure(.noDaemon)).status == 200)
        #expect(WebAPI.answer(.pause, .failure(.noDaemon)).status == 409)
        #expect(WebAPI.answer(.status, .failure(.lost("held"))).status == 200)
        guard case .daemon(let ask) = WebAPI.daemon(.status, start: false) else { Issue.record("not sent to the daemon"); return }
        #expect(ask.patience == WebAPI.statusPatience)
    }
}
