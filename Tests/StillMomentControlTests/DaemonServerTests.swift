// The daemon's Unix-socket listener in process: clients over socketpairs (and its real
// socket for the client limit), the loop turned by the test. The hello and its
// negotiation, subscriptions (state events without progress), a client that never says
// hello, one that reads nothing, one idle too long, and the limit on clients.
import Foundation
import Glibc
import Logging
import Testing
@testable import StillMomentControl
@testable import StillMomentCore

/// The test process's own folder for these daemons, removed when the process exits: with
/// XDG_RUNTIME_DIR still pointing into a test's folder, a PulseAudio client later in the
/// process made `run/pulse` there again after the test had removed it (one empty folder
/// left in /tmp by every `swift test`).
private let processFolder: String = {
    let path = NSTemporaryDirectory() + "sm-server-" + UUID().uuidString
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                             attributes: [.posixPermissions: 0o700])
    atexit { try? FileManager.default.removeItem(atPath: processFolder) }
    return path
}()

@Suite("The daemon's listener", .serialized)
struct DaemonServerTests {
    /// A daemon in a private runtime folder and home.
    static func daemon(_ tune: (inout Daemon.Options) -> Void = { _ in }) throws -> (Daemon, String) {
        let dir = processFolder + "/" + UUID().uuidString.prefix(8)   // a socket path has 108 bytes
        try FileManager.default.createDirectory(atPath: dir + "/run", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        var options = Daemon.Options(onDemand: false)
        tune(&options)
        return try TestEnvironment.exclusive {
            setenv("XDG_RUNTIME_DIR", dir + "/run", 1)
            setenv("STILLMOMENT_HOME", dir + "/home", 1)
            setenv("STILLMOMENT_SOUNDS", SessionServiceTests.root.appendingPathComponent("Sounds").path, 1)
            return (try Daemon(options: options, log: Logger(label: "test")), dir)
        }
    }

    /// The test's end of a socketpair whose other end the daemon serves.
    final class Peer {
        let fd: Int32
        var buffer: [UInt8] = []

        init(_ daemon: Daemon, receiveBuffer: Int32? = nil) {
            var fds: [Int32] = [-1, -1]
            socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds)
            if let size = receiveBuffer {
                var v = size
                setsockopt(fds[0], SOL_SOCKET, SO_RCVBUF, &v, socklen_t(MemoryLayout<Int32>.size))
                setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &v, socklen_t(MemoryLayout<Int32>.size))
            }
            fd = fds[0]
            daemon.adopt(fds[1])
        }

        deinit { close(fd) }

        func send(_ line: String) {
            let bytes = Array((line + "\n").utf8)
            _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }

        /// Sends without blocking, turning the daemon's loop while the socket is full (the
        /// daemon runs on this thread); false once the daemon has closed its end.
        func push(_ line: String, _ daemon: Daemon) -> Bool {
            var bytes = ArraySlice(Array((line + "\n").utf8))
            while !bytes.isEmpty {
                let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                if n > 0 {
                    bytes = bytes.dropFirst(n)
                } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                    _ = daemon.step(cap: 1)
                } else {
                    return false
                }
            }
            return true
        }

        /// The next line, turning the daemon's loop meanwhile; nil when closed or none came.
        func line(_ daemon: Daemon, within seconds: Double = 2) -> JSON? {
            let end = Date().addingTimeInterval(seconds)
            while Date() < end {
                if let i = buffer.firstIndex(of: 0x0A) {
                    let line = Array(buffer[..<i])
                    buffer.removeFirst(i + 1)
                    return try? JSONParser.parse(line)
                }
                _ = daemon.step(cap: 5)
                var chunk = [UInt8](repeating: 0, count: 65536)
                let n = recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
                if n > 0 { buffer += chunk[..<n] } else if n == 0 { return nil }
            }
            return nil
        }

        /// Whether the daemon closed its end within `seconds` (reading what is left).
        func closed(_ daemon: Daemon, within seconds: Double) -> Bool {
            let end = Date().addingTimeInterval(seconds)
            while Date() < end {
                _ = daemon.step(cap: 5)
                var chunk = [UInt8](repeating: 0, count: 65536)
                let n = recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
                if n == 0 { return true }
                if n < 0 && errno != EAGAIN { return true }
            }
            return false
        }
    }

    @Test("the hello negotiates the version; a request is answered with the typed status")
    func helloAndStatus() throws {
        let (daemon, dir) = try Self.daemon()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let old = Peer(daemon), new = Peer(daemon)
        old.send(#"{"hello":{"version":1}}"#)
        new.send(#"{"hello":{"version":7,"language":"de"}}"#)
        #expect(old.line(daemon)?["hello"]?["version"] == .number(1))
        #expect(new.line(daemon)?["hello"]?["version"] == .number(Double(ControlProtocol.version)))
        new.send(#"{"id":1,"command":"status"}"#)
        let answer = new.line(daemon)
        #expect(answer?["id"] == .number(1))
        #expect(answer?["result"]?.decoded(as: Status.self)?.state == .idle)
        // In the language its hello named.
        new.send(#"{"id":2,"command":"pause"}"#)
        #expect(new.line(daemon)?["error"]?["message"] == .string("nichts spielt"))
        old.send(#"{"id":2,"command":"pause"}"#)
        #expect(old.line(daemon)?["error"]?["message"] == .string("nothing is playing"))
    }

    @Test("a subscriber without progress gets the state changes and the end, no progress")
    func subscriptions() throws {
        let (daemon, dir) = try Self.daemon()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let watcher = Peer(daemon), actor = Peer(daemon)
        watcher.send(#"{"hello":{"version":2}}"#)
        actor.send(#"{"hello":{"version":2}}"#)
        _ = watcher.line(daemon)
        _ = actor.line(daemon)
        watcher.send(#"{"id":1,"command":"subscribe","args":{"progress":false}}"#)
        #expect(watcher.line(daemon)?["id"] == .number(1))
        actor.send(#"{"id":1,"command":"timer","args":{"options":{"duration":"24h","preparation":"off","device":"null"}}}"#)
        #expect(actor.line(daemon)?["result"]?["session"] == .number(1))
        usleep(1_200_000)                 // more than a progress period
        actor.send(#"{"id":2,"command":"stop"}"#)
        _ = actor.line(daemon)
        var names: [String] = []
        while let line = watcher.line(daemon, within: 1.5), let event = line.decoded(as: Event.self) {
            names.append(event.name)
            if case .ended(let e) = event {
                #expect(e.session == 1 && e.reason == .stopped)
                break
            }
        }
        #expect(names.contains("state") && names.last == "ended" && !names.contains("progress"), "\(names)")
    }

    @Test("a failure is worded for each client in its own language, when it is written: the answer to a bad request, and the ended event every subscriber gets")
    func eachClientInItsLanguage() throws {
        let (daemon, dir) = try Self.daemon()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let german = Peer(daemon), english = Peer(daemon)
        german.send(#"{"hello":{"version":3,"language":"de"}}"#)
        english.send(#"{"hello":{"version":3,"language":"en"}}"#)
        _ = german.line(daemon)
        _ = english.line(daemon)
        for (peer, expected) in [(german, "unbekanntes Argument 'colour' für seek; es nimmt: at, by, to"),
                                 (english, "unknown argument 'colour' for seek; it takes: at, by, to")] {
            peer.send(#"{"id":1,"command":"seek","args":{"by":1000,"colour":"red"}}"#)
            #expect(peer.line(daemon)?["error"]?["message"] == .string(expected))
            peer.send(#"{"id":2,"command":"subscribe","args":{"progress":false}}"#)
            _ = peer.line(daemon)
        }
        // A device that cannot open: the start is answered, the failure comes as `ended`.
        english.send(#"{"id":3,"command":"timer","args":{"options":{"duration":"1m","device":"hw:99,0"}}}"#)
        var messages: [String: String] = [:]
        for (name, peer) in [("de", german), ("en", english)] {
            for _ in 0..<20 {
                guard let line = peer.line(daemon, within: 1.0) else { break }
                if case .ended(let e)? = line.decoded(as: Event.self) {
                    #expect(e.reason == .failed && e.code == .device)
                    messages[name] = line["data"]?["message"]?.string
                    break
                }
            }
        }
        let de = messages["de"] ?? "", en = messages["en"] ?? ""
        #expect(de.contains("hw:99,0") && en.contains("hw:99,0"), "\(messages)")
        #expect(de.contains("wähle ein anderes Gerät") && en.contains("choose another device"), "\(messages)")
    }

    @Test("a connection without a hello is closed after the hello timeout, with hello-expected")
    func helloTimeout() throws {
        let (daemon, dir) = try Self.daemon { $0.helloTimeout = 0.2 }
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let silent = Peer(daemon)
        let answer = silent.line(daemon, within: 2)
        #expect(answer?["error"]?["code"] == .string("hello-expected"))
        #expect(silent.closed(daemon, within: 1))
    }

    @Test("a client that asks and never reads is dropped once its backlog is full; others are served")
    func backPressure() throws {
        let (daemon, dir) = try Self.daemon { $0.maxBacklog = 16 * 1024 }
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let hog = Peer(daemon, receiveBuffer: 4096), other = Peer(daemon)
        hog.send(#"{"hello":{"version":2}}"#)
        other.send(#"{"hello":{"version":2}}"#)
        _ = other.line(daemon)
        for i in 1...2000 {
            if !hog.push(#"{"id":\#(i),"command":"status"}"#, daemon) { break }    // dropped
        }
        for _ in 0..<200 { _ = daemon.step(cap: 1) }
        #expect(daemon.clientCount == 1, "the hog is dropped (\(daemon.clientCount) clients)")
        other.send(#"{"id":9,"command":"status"}"#)
        #expect(other.line(daemon)?["id"] == .number(9))
    }

    @Test("a connection that neither asks nor listens is closed after the idle timeout; a subscriber is kept")
    func idleClose() throws {
        let (daemon, dir) = try Self.daemon { $0.idleTimeout = 0.3 }
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let idle = Peer(daemon), listener = Peer(daemon)
        idle.send(#"{"hello":{"version":2}}"#)
        listener.send(#"{"hello":{"version":2}}"#)
        _ = idle.line(daemon)
        _ = listener.line(daemon)
        listener.send(#"{"id":1,"command":"subscribe"}"#)
        _ = listener.line(daemon)
        #expect(idle.line(daemon, within: 2)?["error"]?["code"] == .string("busy"))
        #expect(idle.closed(daemon, within: 1))
        #expect(daemon.clientCount == 1)
    }

    @Test("past the client limit a newcomer is refused with busy, until a silent one can make room")
    func clientLimit() throws {
        let (daemon, dir) = try Self.daemon { $0.maxClients = 3 }
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var peers: [Peer] = []
        for _ in 0..<3 {
            let p = Peer(daemon)
            p.send(#"{"hello":{"version":2}}"#)
            _ = p.line(daemon)
            peers.append(p)
        }
        // A real connection to the daemon's socket: accepted and refused at once.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(ControlPaths.socket.utf8CString)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.prefix(raw.count - 1).enumerated() { raw[i] = UInt8(bitPattern: b) }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(rc == 0)
        var got: [UInt8] = []
        let end = Date().addingTimeInterval(2)
        while Date() < end, !got.contains(0x0A) {
            _ = daemon.step(cap: 5)
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if n > 0 { got += chunk[..<n] }
        }
        let refusal = try? JSONParser.parse(got.prefix { $0 != 0x0A })
        #expect(refusal?["error"]?["code"] == .string("busy"))
        #expect(daemon.clientCount == 3)
    }

    @Test("idle, the daemon stores the frame index of an older MP3 meditation and the length of an older sound; never while a session plays")
    func indexesOlderMeditationsWhenIdle() throws {
        let (daemon, dir) = try Self.daemon { $0.indexAfterIdle = 1 }
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try LibraryStore(home: dir + "/home")   // the daemon's, not whatever the environment says now
        let fixtures = SessionServiceTests.root.appendingPathComponent("Tests/Fixtures")
        guard case .imported(let mp3) = try Importer(store: store).importFile(fixtures.appendingPathComponent("cbr.mp3").path),
              case .imported(let m4a) = try Importer(store: store).importFile(fixtures.appendingPathComponent("noedit.m4a").path) else {
            Issue.record("the fixtures did not import")
            return
        }
        let index = try #require(store.seekIndex(for: mp3))
        let sound = try Importer(store: store).importSound(fixtures.appendingPathComponent("cbr.mp3").path, kind: .gong,
                                                           name: "Bell", catalog: try SoundCatalog.bundled())
        let length = try #require(store.soundLengths()[sound.storedFile])
        // As if imported before the index and the length were kept.
        try store.write { db in
            try db.execute(sql: "DELETE FROM seekIndex")
            try db.execute(sql: "UPDATE customSound SET frames = NULL")
        }

        let actor = Peer(daemon)
        actor.send(#"{"hello":{"version":2}}"#)
        _ = actor.line(daemon)
        actor.send(#"{"id":1,"command":"timer","args":{"options":{"duration":"24h","preparation":"off","device":"null"}}}"#)
        #expect(actor.line(daemon)?["result"] != nil)
        let playing = Date().addingTimeInterval(2.5)
        while Date() < playing { _ = daemon.step(cap: 20) }
        #expect(daemon.indexing.stored == 0 && daemon.indexing.counted == 0 && !daemon.indexing.running, "it ran while a timer played")
        #expect(store.seekIndex(for: mp3) == nil && store.soundLengths().isEmpty)

        actor.send(#"{"id":2,"command":"stop"}"#)
        #expect(actor.line(daemon)?["result"] != nil)
        let end = Date().addingTimeInterval(15)
        while Date() < end, !daemon.indexing.finished { _ = daemon.step(cap: 20) }
        #expect(daemon.indexing.finished && daemon.indexing.stored == 1 && daemon.indexing.counted == 1, "\(daemon.indexing)")
        #expect(store.seekIndex(for: mp3) == index)
        #expect(store.soundLengths() == [sound.storedFile: length])
        #expect(store.seekIndex(for: m4a) == nil)
    }
}
