/// What a session is doing now, as every reader shows it (the daemon's status and events,
/// the web app through them, the live view of `--foreground`): each session says it of
/// itself, so no reader switches on the kind of session or reaches into its plan.
public struct SessionSnapshot: Sendable, Equatable {
    /// preparation, startGong, running, endGong, completed, stopped (a timer); preparation,
    /// startGong, playing (a guided meditation); bell.
    public enum Phase: String, Sendable, CaseIterable {
        case preparation, startGong, running, endGong, completed, stopped, playing, bell
    }

    public struct Section: Sendable, Equatable {
        public var index: Int
        public var kind: StillMomentCore.Section.Kind
        /// ms left in it
        public var remaining: Int64
        public var count: Int
    }

    public var phase: Phase
    public var paused: Bool
    /// A timer: ms since the start gong, left (nil for an open sit), its length.
    public var elapsed: Int64?
    public var remaining: Int64?
    public var duration: Int64?
    public var open = false
    public var section: Section?
    /// ms from the start gong to the next gong (a timer's).
    public var nextGong: Int64?
    /// A guided meditation: ms until its voice begins (before it), the position in the file.
    public var startsIn: Int64?
    public var position: Int64?
    /// A bell: its sound's id.
    public var sound: String?

    public init(phase: Phase, paused: Bool) {
        self.phase = phase
        self.paused = paused
    }
}

extension TimerSession {
    public var snapshot: SessionSnapshot {
        let p = position
        // Before its first block and after its end the session's own state says nothing
        // useful (idle, completed): the plan says which phase that frame is in.
        let state = [.idle, .completed, .stopped].contains(self.state) ? plan.state(at: p) : self.state
        var s = SessionSnapshot(phase: SessionSnapshot.Phase(rawValue: state.rawValue) ?? .running, paused: isPaused)
        s.elapsed = plan.elapsed(at: p)
        s.remaining = configuration.openEnded ? nil : plan.remaining(at: p)
        s.duration = configuration.duration
        s.open = configuration.openEnded
        if let section = plan.section(at: p) {
            s.section = .init(index: section.index, kind: section.kind, remaining: section.remaining,
                              count: plan.sections?.list.count ?? 0)
        }
        if let next = plan.nextGong(after: p), next > plan.meditationStart {
            s.nextGong = plan.milliseconds(next - plan.meditationStart)
        }
        return s
    }
}

extension GuidedSession {
    public var snapshot: SessionSnapshot {
        // Before the voice: the preparation, then the start gong and its pause, with the
        // time until the voice begins.
        let p = position
        var s = SessionSnapshot(phase: p < preparationEnd ? .preparation : p < voiceStart ? .startGong : .playing, paused: isPaused)
        if p < voiceStart { s.startsIn = (voiceStart - p) * 1000 / Int64(engine.sampleRate) }
        s.position = filePosition
        s.duration = meditation.trimEnd ?? meditation.durationMilliseconds
        return s
    }
}

extension BellSession {
    public var snapshot: SessionSnapshot {
        var s = SessionSnapshot(phase: .bell, paused: isPaused)
        s.sound = sound.id
        return s
    }
}
