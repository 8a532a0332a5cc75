// Runs the hooks of a session's start or end: each on a low-priority thread of its own
// (never the poll loop's, never a session's), by argv with the session's facts in its
// environment, its output line by line into the daemon's log, ended with its whole process
// group after a timeout. A hook that fails is logged once and not run again for that event.
import CSystem
import FoundationEssentials
import Glibc
import Logging
import StillMomentAudio
import StillMomentCore
import Synchronization

public final class HookRunner: Sendable {
    private let hooks: Mutex<[Hook]>
    private let log: Logger
    /// Seconds a hook may run before its process group is killed.
    let timeout: Double
    /// Hooks running now (tests wait for it to come back to 0).
    let running = Atomic<Int>(0)

    public init(hooks: [Hook], timeout: Double = 30, log: Logger) {
        self.hooks = Mutex(hooks)
        self.timeout = timeout
        self.log = log
    }

    /// Replaces the hooks (the daemon re-reads them when told that the stored ones changed).
    func reload(_ list: [Hook]) { hooks.withLock { $0 = list } }

    /// Runs the hooks for `when` with `record`'s facts. Returns at once.
    func fire(_ when: Hook.When, _ record: SessionRecord) {
        guard !record.rendered, record.kind.isPractice else { return }
        let list = hooks.withLock { $0.filter { $0.when == when } }
        guard !list.isEmpty else { return }
        let env = SessionFacts.environment(record, when: when)
        for hook in list { start(hook, env) }
    }

    private final class Job: Sendable {
        let runner: HookRunner
        let hook: Hook
        let env: [String: String]
        init(_ runner: HookRunner, _ hook: Hook, _ env: [String: String]) {
            self.runner = runner
            self.hook = hook
            self.env = env
        }
    }

    private func start(_ hook: Hook, _ env: [String: String]) {
        running.add(1, ordering: .acquiringAndReleasing)
        let context = Unmanaged.passRetained(Job(self, hook, env))
        let rc = sm_run_background({ raw in
            guard let raw else { return }
            let job = Unmanaged<Job>.fromOpaque(raw).takeRetainedValue()
            job.runner.run(job.hook, job.env)
            job.runner.running.subtract(1, ordering: .acquiringAndReleasing)
        }, context.toOpaque())
        if rc != 0 {
            context.release()
            running.subtract(1, ordering: .acquiringAndReleasing)
            log.error("hook \(hook.id) not run: no thread (\(String(cString: strerror(-rc))))")
        }
    }

    /// The environment: the daemon's own, then the session's facts over it.
    private static func environment(_ facts: [String: String]) -> [String] {
        var list: [String] = []
        var p = environ
        while let entry = p.pointee {
            let text = String(cString: entry)
            if !text.hasPrefix("STILLMOMENT_EVENT=") && !facts.keys.contains(where: { text.hasPrefix($0 + "=") }) {
                list.append(text)
            }
            p += 1
        }
        for (k, v) in facts.sorted(by: { $0.key < $1.key }) { list.append("\(k)=\(v)") }
        return list
    }

    /// Runs one hook to its end or its timeout (on its own thread).
    func run(_ hook: Hook, _ facts: [String: String]) {
        let name = "hook \(hook.id) (\(hook.when.rawValue) \(Display.clean(hook.argv[0])))"
        var fds: [Int32] = [0, 0]
        guard sm_pipe_cloexec(&fds) == 0 else {
            log.error("\(name) not run: no pipe")
            return
        }
        let pid = withCStrings(hook.argv) { argv in
            withCStrings(Self.environment(facts)) { envp in
                sm_spawn_group(hook.argv[0], argv, envp, fds[1])
            }
        }
        close(fds[1])
        guard pid > 0 else {
            close(fds[0])
            log.error("\(name) could not start: \(String(cString: strerror(-pid)))")
            return
        }
        let started = MonotonicClock.seconds()
        let deadline = started + timeout
        var pending: [UInt8] = [], logged = 0, timedOut = false
        var buf = [UInt8](repeating: 0, count: 4096)
        func emit(_ line: ArraySlice<UInt8>) {
            guard logged < 64 * 1024 else { return }
            logged += line.count
            log.info("\(name): \(Display.clean(String(decoding: line.prefix(1000), as: UTF8.self)))")
        }
        // Its output until it closes it (it ended) or the time is up.
        while true {
            let left = deadline - MonotonicClock.seconds()
            if left <= 0 { timedOut = true; break }
            var p = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            let n = poll(&p, 1, Int32(min(left, 1) * 1000) + 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { continue }
            let got = read(fds[0], &buf, buf.count)
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { break }
            pending += buf[0..<got]
            while let nl = pending.firstIndex(of: 10) {
                emit(pending[..<nl])
                pending.removeSubrange(...nl)
            }
            if pending.count > 4096 {
                emit(pending[...])
                pending.removeAll()
            }
        }
        if !pending.isEmpty { emit(pending[...]) }
        close(fds[0])
        // Its end (a program that closed its output may still run: the same deadline).
        var status: Int32 = 0
        while !timedOut {
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid { break }
            if r < 0 && errno != EINTR { return }
            if MonotonicClock.seconds() >= deadline { timedOut = true; break }
            usleep(10_000)
        }
        if timedOut {
            kill(-pid, SIGKILL)
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            log.error("\(name) ran longer than \(Daemon.seconds(timeout)) s: ended (its process group killed)")
            return
        }
        let exited = status & 0x7f == 0
        let code = (status >> 8) & 0xff
        if exited && code == 0 {
            log.info("\(name) done in \(Int((MonotonicClock.seconds() - started) * 1000)) ms")
        } else if exited {
            log.error("\(name) failed: exit status \(code)")
        } else {
            log.error("\(name) failed: killed by signal \(status & 0x7f)")
        }
    }
}

/// Runs `body` with `words` as a NULL-terminated array of C strings.
func withCStrings<R>(_ words: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) }
    pointers.append(nil)
    defer { for p in pointers { free(p) } }
    return body(pointers)
}
