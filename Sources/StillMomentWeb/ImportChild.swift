// Runs an upload's import in a child process (`stillmoment web import-upload`): its first
// line is the HTTP status, the rest the JSON answer. The child gets the caller's language.
import Glibc
import StillMomentCore

enum ImportChild {
    static func run(path: String, name: String) -> Response {
        guard let exe = Paths.executable else { return .error(500, "failed", "cannot find the stillmoment executable") }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return .error(500, "failed", String(cString: strerror(errno))) }
        defer { close(fds[0]) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addclose(&actions, fds[0])
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // Both after `--`: the browser's file name (`-x.mp3`, `--help`) is never an option.
        let args = [exe, "web", "import-upload", "--", path, name]
        var env = ProcessEnvironment.current.filter { !$0.hasPrefix("LC_ALL=") && !$0.hasPrefix("LC_MESSAGES=") }
        env.append(Language.current == .de ? "LC_ALL=de_DE.UTF-8" : "LC_ALL=C.UTF-8")
        var cArgs = args.map { strdup($0) } + [nil]
        var cEnv = env.map { strdup($0) } + [nil]
        defer {
            for a in cArgs { free(a) }
            for e in cEnv { free(e) }
        }
        var pid = pid_t()
        let r = posix_spawn(&pid, exe, &actions, nil, &cArgs, &cEnv)
        close(fds[1])
        guard r == 0 else { return .error(500, "failed", "cannot start the import: \(String(cString: strerror(r)))") }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let got = read(fds[0], &chunk, chunk.count)
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { break }
            if out.count < 1 << 20 { out.append(contentsOf: chunk[0..<got]) }
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard let newline = out.firstIndex(of: 10), let code = Int(String(decoding: out[..<newline], as: UTF8.self)),
              (200...599).contains(code) else {
            return .error(500, "failed", tr("the import stopped without an answer (wait status \(status)); its reason is in the web app's log (journalctl --user -u stillmoment-web); try the upload again",
                                            "der Import endete ohne Antwort (Wartestatus \(status)); der Grund steht im Protokoll der Web-App (journalctl --user -u stillmoment-web); das Hochladen noch einmal versuchen"))
        }
        return Response(status: code, body: Array(out[(newline + 1)...]))
    }
}

/// The process's environment as `KEY=VALUE` lines.
enum ProcessEnvironment {
    static var current: [String] {
        var out: [String] = []
        var p = environ
        while let entry = p.pointee {
            out.append(String(cString: entry))
            p += 1
        }
        return out
    }
}
