// A session played in this process (`play --foreground`, `timer` without the daemon): once
// it has played 3 s, the code its start-up ran (argument parsing, the catalog, the
// decoder's opening) is released, as the daemon does 3 s into each session (CodePages.swift).
// It held 27 MB throughout before; what plays faults back the little it runs.
import StillMomentControl
import StillMomentAudio

struct SteadyCodeRelease {
    private let started = MonotonicClock.seconds()
    private var done = false

    /// Called on each turn of the session's loop; releases once, 3 s after the start.
    mutating func tick() {
        guard !done, MonotonicClock.seconds() - started >= 3 else { return }
        done = true
        CodePages.release()
    }
}
