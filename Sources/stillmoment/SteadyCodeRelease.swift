// A session played in this process (`play --foreground`, `timer` without the daemon): once
// it has played 3 s, the code its start-up ran (argument parsing, the catalog, the
// decoder's opening) is released, as the daemon does 3 s into each session (CodePages.swift).
// It held 27 MB throughout before; what plays faults back the little it runs. Its start's
// steps release what the step before ran too (StartCodeRelease).
import StillMomentControl
import StillMomentAudio

/// The same for the steps of a session's start in this process: the code the step before
/// ran (argument parsing; the store's opening and the catalog; the session's making) is
/// released before the next, so the process's peak is about its largest step's, not the
/// sum of all (`play --foreground` on PulseAudio: 16.4 MB after parsing, 20.6 MB once the
/// store was open, a 27.2-MB peak; with the releases 16.8–17.6 MB). Not for a render to
/// a file, which is over soon.
enum StartCodeRelease {
    /// Called between two steps of the start; `playing`: the session plays (not a render).
    static func step(playing: Bool) {
        if playing { CodePages.release() }
    }
}

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
