// Upload files and the start's clean-up: a file no process holds (a crash's leftover, of
// any age) is removed at once; an upload in flight, held with flock, stays.
import Foundation
import Glibc
import Testing
@testable import StillMomentWeb

@Suite("Web uploads")
struct UploadTests {
    @Test("the clean-up removes every unlocked leftover at once and keeps a live upload")
    func cleanUp() throws {
        var template = Array("/tmp/sm-upload-XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ buf in buf.baseAddress.flatMap { mkdtemp($0) } }) else {
            Issue.record("mkdtemp failed")
            return
        }
        let home = String(cString: p)
        defer { _ = system("rm -rf '\(home)'") }
        let live = try Upload(home: home, name: "live.mp3")
        try live.append(Array(repeating: 0xFF, count: 1000)[...])
        let folder = Upload.folder(home: home)
        // A crash's leftovers, just written: a cut-off upload, an odd name, a dangling link.
        for name in ["upload-dead.mp3", "-x.mp3"] {
            #expect(FileManager.default.createFile(atPath: folder + "/" + name, contents: Data(repeating: 1, count: 500)))
        }
        #expect(symlink("/nonexistent", folder + "/upload-link.mp3") == 0)
        Upload.cleanFolder(home: home)
        let left = try FileManager.default.contentsOfDirectory(atPath: folder)
        #expect(left == [String(live.path.split(separator: "/").last ?? "")], "\(left)")
        live.finish()
        Upload.cleanFolder(home: home)
        #expect(access(live.path, F_OK) == 0, "a finished upload being imported is still held")
        live.discard()
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
    }
}
