/// A detached thread for one long job (the web app's import of an upload and its daemon
/// link's loop; the daemon's sync cycle), so the loop that starts it goes on meanwhile. Not Dispatch's global queue: on Linux its workqueue, once used,
/// woke the process every second for good, and an idle web app must not wake at all.
import Glibc

public enum BackgroundThread {
    private final class Job {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// Runs `body` on a new detached thread; false when no thread could be started.
    public static func run(_ body: @escaping @Sendable () -> Void) -> Bool {
        let box = Unmanaged.passRetained(Job(body)).toOpaque()
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        defer { pthread_attr_destroy(&attr) }
        pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
        var tid = pthread_t()
        let rc = pthread_create(&tid, &attr, { arg in
            guard let arg else { return nil }
            Unmanaged<Job>.fromOpaque(arg).takeRetainedValue().body()
            return nil
        }, box)
        if rc != 0 {
            Unmanaged<Job>.fromOpaque(box).release()
            return false
        }
        return true
    }
}
