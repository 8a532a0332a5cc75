/// The client's trust in a daemon (runtime folder, socket, peer) and what it prints of a
/// daemon's words: refusals name the folder and what to do; no control character survives.
import Foundation
import Glibc
import StillMomentCore
import Testing
@testable import StillMomentControl

@Suite("Trust and what a client prints")
struct TrustTests {
    static func folderStat(mode: mode_t, uid: uid_t, kind: mode_t = S_IFDIR) -> stat {
        var st = stat()
        st.st_mode = kind | mode
        st.st_uid = uid
        return st
    }

    static let me: uid_t = 1000

    struct Probe: Sendable, CustomTestStringConvertible {
        let folder: stat
        let socket: stat?
        let why: String
        let todo: String
        init(_ folder: stat, _ socket: stat?, _ why: String, _ todo: String) {
            (self.folder, self.socket, self.why, self.todo) = (folder, socket, why, todo)
        }
        var testDescription: String { why }
    }

    func check(_ folder: stat, socket: stat? = nil) -> ControlError? {
        ControlPaths.distrust(folder: "/tmp/stillmoment-1000", folder, socket: socket, me: Self.me, german: false)
    }

    @Test("a private folder of ours, with a socket of ours or none, is trusted")
    func trusted() {
        #expect(check(Self.folderStat(mode: 0o700, uid: Self.me)) == nil)
        #expect(check(Self.folderStat(mode: 0o700, uid: Self.me), socket: Self.folderStat(mode: 0o600, uid: Self.me, kind: S_IFSOCK)) == nil)
        // The socket's own mode does not matter inside a private folder.
        #expect(check(Self.folderStat(mode: 0o500, uid: Self.me), socket: Self.folderStat(mode: 0o777, uid: Self.me, kind: S_IFSOCK)) == nil)
    }

    @Test("another user's folder, an open folder, a link, a foreign socket: refused in one line naming the folder and what to do",
          arguments: [
            Probe(TrustTests.folderStat(mode: 0o700, uid: 65534), nil, "belongs to another user (uid 65534)", "remove it, or set XDG_RUNTIME_DIR"),
            Probe(TrustTests.folderStat(mode: 0o700, uid: 0), nil, "belongs to another user (uid 0)", "XDG_RUNTIME_DIR"),
            Probe(TrustTests.folderStat(mode: 0o755, uid: TrustTests.me), nil, "is open to other users (mode 755)", "chmod 700 /tmp/stillmoment-1000"),
            Probe(TrustTests.folderStat(mode: 0o710, uid: TrustTests.me), nil, "is open to other users (mode 710)", "chmod 700"),
            Probe(TrustTests.folderStat(mode: 0o701, uid: TrustTests.me), nil, "is open to other users (mode 701)", "chmod 700"),
            Probe(TrustTests.folderStat(mode: 0o1777, uid: TrustTests.me), nil, "is open to other users", "chmod 700"),
            Probe(TrustTests.folderStat(mode: 0o777, uid: TrustTests.me, kind: S_IFLNK), nil, "is not a folder", "remove it"),
            Probe(TrustTests.folderStat(mode: 0o600, uid: TrustTests.me, kind: S_IFREG), nil, "is not a folder", "remove it"),
            Probe(TrustTests.folderStat(mode: 0o700, uid: TrustTests.me), TrustTests.folderStat(mode: 0o600, uid: 65534, kind: S_IFSOCK), "holds a control.sock that is not ours",
             "remove /tmp/stillmoment-1000/control.sock"),
            Probe(TrustTests.folderStat(mode: 0o700, uid: TrustTests.me), TrustTests.folderStat(mode: 0o600, uid: TrustTests.me, kind: S_IFREG), "holds a control.sock that is not ours", "remove"),
            Probe(TrustTests.folderStat(mode: 0o700, uid: TrustTests.me), TrustTests.folderStat(mode: 0o777, uid: TrustTests.me, kind: S_IFLNK), "holds a control.sock that is not ours", "remove"),
          ])
    func refused(_ p: Probe) {
        let (folder, socket, why, todo) = (p.folder, p.socket, p.why, p.todo)
        guard let error = check(folder, socket: socket) else {
            Issue.record("trusted: \(why)")
            return
        }
        guard case .untrusted = error else {
            Issue.record("not .untrusted: \(error)")
            return
        }
        let text = error.description
        #expect(text.hasPrefix("/tmp/stillmoment-1000 "), "\(text)")
        #expect(text.contains(why), "\(text)")
        #expect(text.contains("refusing to talk to a daemon there"), "\(text)")
        #expect(text.contains(todo), "\(text)")
        #expect(!text.contains("\n"))
    }

    @Test("German refusals too")
    func german() {
        let error = ControlPaths.distrust(folder: "/tmp/x", Self.folderStat(mode: 0o700, uid: 65534), socket: nil, me: Self.me, german: true)
        #expect(error?.description.contains("gehört einem anderen Benutzer") == true)
    }

    @Test("on disk: a fresh 0700 folder is trusted; opened, linked or given away it is not")
    func onDisk() throws {
        let base = FileManager.default.temporaryDirectory.path + "/sm-trust-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        #expect(mkdir(base, 0o700) == 0)
        defer { _ = try? FileManager.default.removeItem(atPath: base) }
        let folder = base + "/stillmoment"
        let socket = folder + "/control.sock"
        // Nothing there: nothing to refuse (the caller finds no daemon).
        #expect(ControlPaths.distrust(socket) == nil)
        #expect(mkdir(folder, 0o700) == 0)
        #expect(ControlPaths.distrust(socket) == nil)
        #expect(chmod(folder, 0o750) == 0)
        #expect(ControlPaths.distrust(socket)?.description.contains("is open to other users (mode 750)") == true)
        #expect(chmod(folder, 0o700) == 0)
        // A regular file where the socket should be.
        let fd = open(socket, O_CREAT | O_WRONLY | O_EXCL, 0o600)
        #expect(fd >= 0)
        close(fd)
        #expect(ControlPaths.distrust(socket)?.description.contains("control.sock that is not ours") == true)
        #expect(unlink(socket) == 0)
        // A link in the folder's place, even to a good folder of ours.
        let linked = base + "/linked"
        #expect(symlink(folder, linked) == 0)
        #expect(ControlPaths.distrust(linked + "/control.sock")?.description.contains("is not a folder") == true)
        // Another user's folder (only root can make one).
        if geteuid() == 0 {
            #expect(chown(folder, 65534, 65534) == 0)
            #expect(ControlPaths.distrust(socket)?.description.contains("belongs to another user (uid 65534)") == true)
        }
    }

    @Test("a daemon's refusal and every error description carry no control character and stay on one line")
    func clean() {
        let hostile = "x\u{1B}]0;owned\u{07}\u{1B}[2J\u{1B}[31mred\u{9B}31m\u{85}next\r\nline\ttab\u{7F}\u{0}end"
        let errors: [ControlError] = [
            .refusal(code: "busy\u{1B}[2J", words: both(hostile, hostile)),
            .io(hostile), .lost(hostile), .untrusted(hostile),
        ]
        for e in errors {
            let text = e.description
            #expect(!text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, "\(text.debugDescription)")
            #expect(text.contains("red"))
            #expect(text.contains("end"))
        }
        // What the CLI reads out of a refusal directly is clean too.
        // (from the error answer's both languages, as a version 3 daemon sends it)
        let answer = JSON.object(["code": .string("busy\u{1B}[2J"), "message": .string(hostile),
                                  "words": .object(["en": .string(hostile), "de": .string(hostile)])])
        if case .refused(let code, let words) = ControlError.refusal(answer) {
            #expect(code == .failed)      // not a code this client knows
            for message in [words.en, words.de] {
                #expect(!message.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
            }
        } else {
            Issue.record("not a refusal")
        }
        #expect(ControlError.refusal(code: "no-session", words: .same("nothing is playing")) == .refused(code: .noSession, words: .same("nothing is playing")))
        // A version 2 daemon's answer has only the message.
        #expect(ControlError.refusal(.object(["code": .string("no-session"), "message": .string("nichts spielt")])) == .refused(code: .noSession, words: .same("nichts spielt")))
        // A code from a newer daemon that this client does not know is a failure.
        #expect(ControlError.refusal(code: "something-new", words: .same("m")) == .refused(code: .failed, words: .same("m")))
    }
}
