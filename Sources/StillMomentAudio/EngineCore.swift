import CAudio
import Dispatch
import Glibc
import Synchronization

/// The engine's insides. `mixer`, `writer`, `end` and `block` belong to the render
/// thread (and to whoever holds the engine before the thread starts or after it is
/// joined); every other member is immutable, atomic or behind a Mutex. That
/// confinement is why the class may be marked Sendable.
final class EngineCore: @unchecked Sendable {
    enum Command {
        case add(Voice)
        case schedule(ScoreEntry)
        case setEnd(Int64?)
        case pause
        /// Paused with the device kept running on silence (a resume then meets its instant
        /// to the frame, as a start on a device kept open does).
        case pauseRunning
        case resume
        case seek(Int64)
        case fadeOut(Int64)
        case finish(FinishPlan)
        case stop
        case shutdown
    }

    /// A queued command. It moves to the render thread and the poster never touches it
    /// again (the commands are taken as `sending`), so crossing threads is safe.
    private struct Pending: @unchecked Sendable {
        let command: Command
        let done: DispatchSemaphore?
    }

    let output: OpaquePointer?
    let sampleRate: Int
    let state = Atomic<UInt8>(AudioEngine.State.idle.rawValue)
    let renderFrame = Atomic<Int64>(0)
    let errors = Mutex<[AudioError]>([])
    let doneSignal = DispatchSemaphore(value: 0)

    private let commands = Mutex<[Pending]>([])
    private let wake = DispatchSemaphore(value: 0)
    private let threadRunning = Atomic<Bool>(false)
    /// Ring index `ringBase` holds timeline frame `timelineBase`; later ring frames follow on.
    private let mapping = Mutex<(ringBase: UInt64, timelineBase: Int64)>((0, 0))

    // Render-thread state.
    private let mixer: Mixer
    private let writer: WAVWriter?
    private var end: Int64?
    /// A fade at the consumer in progress (its request number).
    private var fadeRequest: UInt32?
    /// A fade to the end (a stop) is under way at the consumer: pause and seek end it.
    private var stopping: Bool { fadeRequest != nil }
    private var block: [Float]
    private let blockFrames: Int

    /// What the device was opened with, to keep it open at the close (Standby).
    private let standbyKey: (configuration: DeviceConfiguration, sampleRate: Int)?
    /// The output's counters when this engine got it (a device kept open counted before).
    let baseline: sm_output_stats

    init(sampleRate: Int, output: OpaquePointer?, writer: WAVWriter?, blockFrames: Int,
         standbyKey: (DeviceConfiguration, Int)? = nil) {
        self.sampleRate = sampleRate
        self.output = output
        self.standbyKey = standbyKey.map { (configuration: $0.0, sampleRate: $0.1) }
        baseline = output.map { sm_output_get_stats($0) } ?? sm_output_stats()
        // The timeline starts at the ring's next frame (not 0 on a device kept open).
        let base = output.map { sm_ring_write_index(sm_output_ring($0)) } ?? 0
        mapping.withLock { $0 = (base, 0) }
        self.writer = writer
        self.blockFrames = max(64, blockFrames)
        mixer = Mixer(sampleRate: sampleRate, maxBlock: max(64, blockFrames))
        block = [Float](repeating: 0, count: max(64, blockFrames) * 2)
    }

    /// Whether the device is still open. Threads other than the render thread reach the
    /// output only under this lock, so `close` cannot free it under them.
    private let outputOpen = Mutex<Bool>(true)
    /// The position heard when the device was closed (what `position` says afterwards).
    private let closedPosition = Atomic<Int64>(0)
    /// The output's last statistics and error, kept when the device is closed.
    let closedReport = Mutex<(stats: sm_output_stats, error: sm_error)?>(nil)
    /// How late the aligned start was (ns), kept when the device is closed.
    let closedAlignLate = Atomic<UInt64>(0)
    /// What the aligned start left out to be on time (ns), kept when the device is closed.
    let closedAlignSkipped = Atomic<UInt64>(0)

    /// Runs `body` on the device's output, unless there is none or it was closed.
    func withOutput<T: Sendable>(_ body: (OpaquePointer) -> T) -> T? {
        guard let output else { return nil }
        return outputOpen.withLock { open in open ? body(output) : nil }
    }

    /// Releases the device (once; the render thread must have ended): closes it, or hands
    /// it to the standby. Other threads stop reaching it under the lock; the close or the
    /// hand-over (which waits for the output thread) comes after it, so a status asked
    /// meanwhile is not held up.
    func close() {
        guard let output else { return }
        let closing = outputOpen.withLock { open -> Bool in
            guard open else { return false }
            closedPosition.store(timeline(forRing: sm_output_played_index(output)), ordering: .relaxed)
            var error = sm_error()
            sm_output_last_error(output, &error)
            let report = (stats: sm_output_get_stats(output), error: error)
            closedReport.withLock { $0 = report }
            closedAlignLate.store(sm_output_align_late(output), ordering: .relaxed)
            closedAlignSkipped.store(sm_output_align_skipped(output), ordering: .relaxed)
            open = false
            return true
        }
        guard closing else { return }
        if let key = standbyKey, let standby = key.configuration.standby,
           standby.hold(output, configuration: key.configuration, sampleRate: key.sampleRate) {
            return
        }
        sm_output_close(output)
    }

    func startOutput() throws(AudioError) {
        guard let output else { return }
        var error = sm_error()
        if sm_output_start(output, &error) != 0 {
            throw AudioError.device(DeviceError(error, device: ""))
        }
    }

    private var currentState: AudioEngine.State {
        AudioEngine.State(rawValue: state.load(ordering: .acquiring)) ?? .failed
    }

    /// Called on the thread that changes the state when it leaves `running` (paused,
    /// finished, stopped, failed): the daemon's loop is woken, and need not look.
    let onSettled = Mutex<(@Sendable () -> Void)?>(nil)

    private func setState(_ s: AudioEngine.State) {
        state.store(s.rawValue, ordering: .releasing)
        if s != .running && s != .idle {
            doneSignal.signal()
            onSettled.withLock { $0 }?()
        }
    }

    // MARK: commands

    func post(_ command: sending Command) {
        commands.withLock { $0.append(Pending(command: command, done: nil)) }
        poke()
    }

    /// Posts a command and waits until the render thread has carried it out. Before the
    /// engine is started (or after its thread ended) it only queues. Once `start` has
    /// created the thread it waits, even if the thread has not run yet: a seek right after
    /// a start is done when this returns (before, it returned at once on a busy machine,
    /// and a position read next was the one before the seek).
    func call(_ command: sending Command) {
        let done = DispatchSemaphore(value: 0)
        commands.withLock { $0.append(Pending(command: command, done: done)) }
        poke()
        while threadRunning.load(ordering: .acquiring) {
            if done.wait(timeout: .now() + 0.1) == .success { return }
        }
    }

    private func poke() {
        wake.signal()
        _ = withOutput { output in
            sm_output_notify(output)
            sm_output_wake_producer(output)
        }
    }

    /// Carries out queued commands; false when the thread must end.
    private func processCommands() -> Bool {
        let pending = commands.withLock { list -> [Pending] in
            let taken = list
            list.removeAll()
            return taken
        }
        var keepGoing = true
        for p in pending {
            if keepGoing { keepGoing = handle(p.command) }
            p.done?.signal()
        }
        return keepGoing
    }

    private func handle(_ command: Command) -> Bool {
        let t = renderFrame.load(ordering: .relaxed)
        switch command {
        case .add(let voice):
            mixer.add(voice)
        case .schedule(let entry):
            mixer.schedule(entry)
        case .setEnd(let e):
            end = e
            if currentState == .finished, let e, e > t { reopen() }
        case .pause, .pauseRunning:
            guard currentState == .running else { break }
            // A pause during the fade of a stop ends the session there (the stop stands).
            let ending = stopping
            if let output {
                haltOutput(request: SM_REQ_PAUSE, thenAt: nil)
                if case .pauseRunning = command, !ending {
                    sm_output_standby_holds_pause(output)
                    _ = sm_output_wait(output, sm_output_post(output, Int32(SM_REQ_STANDBY.rawValue)), 3000)
                }
            }
            setState(ending ? .finished : .paused)
        case .resume:
            guard currentState == .paused else { break }
            if let output {
                // The ring was emptied at the pause: fill a quarter of a second before the
                // device starts again, or it would run dry at once and play silence.
                fill(upTo: UInt32(sampleRate / 4))
                _ = sm_output_wait(output, sm_output_post(output, Int32(SM_REQ_RESUME.rawValue)), 2000)
            }
            setState(.running)
        case .seek(let frame):
            let s = currentState
            if stopping {
                // The session is fading out to its end: a seek does not bring it back.
                haltOutput(request: SM_REQ_PAUSE, thenAt: nil)
                setState(.finished)
                break
            }
            if output != nil, s == .running {
                haltOutput(request: SM_REQ_FLUSH, thenAt: frame)
                // The device holds silence after the flush (a few ms, or its buffer where
                // that is taken back): the first 50 ms of the new position at once.
                fill(upTo: UInt32(sampleRate / 20))
            } else {
                rebase(at: frame)
            }
            if s == .finished, end.map({ frame < $0 }) ?? true { reopen() }
        case .fadeOut(let frames):
            switch currentState {
            case .running:
                if let output {
                    fadeRequest = sm_output_post_fade(output, UInt32(clamping: max(1, frames)))
                } else {
                    for v in mixer.voices { v.fadeOut(at: t, over: max(1, frames)) }
                    end = min(end ?? .max, t + max(1, frames))
                }
            case .paused, .idle:
                setState(.finished)
            default:
                break
            }
        case .finish(let plan):
            // From the next frame rendered: nothing more of the score starts, what sounds
            // fades out, and the closing entries (an end gong) play to the new end.
            guard currentState == .running || currentState == .paused else { break }
            mixer.cutScore(from: t)
            for v in mixer.voices { v.fadeOut(at: t, over: max(1, plan.fade)) }
            let entries = plan.entries(t)
            for e in entries { mixer.schedule(e) }
            end = entries.compactMap(\.end).max().map { max($0, t + plan.fade) } ?? t + plan.fade
        case .stop:
            if output != nil, currentState == .running { haltOutput(request: SM_REQ_PAUSE, thenAt: nil) }
            // A render stopped before its end is not the session: nothing is left behind.
            if let writer, currentState != .finished { writer.discard() }
            setState(.stopped)
            return false
        case .shutdown:
            return false
        }
        return true
    }

    /// After the end was reached, more is to be played (a seek back, a later end).
    private func reopen() {
        if let output {
            // The ring may hold a block rendered just after a fade to the end was over
            // (the consumer had flushed the ring, this thread saw it a moment later).
            _ = sm_output_wait(output, sm_output_post(output, Int32(SM_REQ_FLUSH.rawValue)), 2000)
            _ = sm_output_wait(output, sm_output_post(output, Int32(SM_REQ_RESUME.rawValue)), 2000)
        }
        setState(.running)
    }

    /// Ramps out and flushes at the consumer, then rewinds the timeline to the frame
    /// actually played (or moves it to `frame`).
    private func haltOutput(request: sm_request, thenAt frame: Int64?) {
        guard let output else { return }
        fadeRequest = nil
        topUpForRamp()
        let seq = sm_output_post(output, Int32(request.rawValue))
        _ = sm_output_wait(output, seq, 3000)
        let stopped = timeline(forRing: sm_output_stop_index(output))
        rebase(at: frame ?? stopped)
    }

    /// Continues the timeline from `frame` with the next frame written to the ring.
    private func rebase(at frame: Int64) {
        let ringBase = output.map { sm_ring_write_index(sm_output_ring($0)) } ?? 0
        mapping.withLock { $0 = (ringBase, frame) }
        mixer.seek(to: frame)
        renderFrame.store(frame, ordering: .relaxed)
    }

    func timeline(forRing index: UInt64) -> Int64 {
        let (ringBase, timelineBase) = mapping.withLock { $0 }
        let rendered = renderFrame.load(ordering: .relaxed)
        guard index > ringBase else { return min(timelineBase, rendered) }
        return min(timelineBase + Int64(index - ringBase), rendered)
    }

    func position() -> Int64 {
        guard output != nil else { return renderFrame.load(ordering: .relaxed) }
        return withOutput { timeline(forRing: sm_output_played_index($0)) } ?? closedPosition.load(ordering: .relaxed)
    }

    func position(heardAt ns: UInt64) -> Int64 {
        guard output != nil else { return renderFrame.load(ordering: .relaxed) }
        return withOutput { timeline(forRing: sm_output_played_index_at($0, ns)) } ?? closedPosition.load(ordering: .relaxed)
    }

    // MARK: the render thread

    /// Called by `start` just before it creates the render thread (and `threadFailed` if
    /// that fails): from here on `call` waits for its command.
    func threadStarting() { threadRunning.store(true, ordering: .releasing) }
    func threadFailed() { threadRunning.store(false, ordering: .releasing) }

    func renderLoop() {
        threadRunning.store(true, ordering: .releasing)
        // What the device plays after a seek or a resume is rendered here, under a deadline.
        if let output { sm_output_raise_producer(output) }
        defer {
            threadRunning.store(false, ordering: .releasing)
            // Answer anyone still waiting.
            let left = commands.withLock { list -> [Pending] in
                defer { list.removeAll() }
                return list
            }
            for p in left { p.done?.signal() }
            doneSignal.signal()
        }
        setState(.running)
        while processCommands() {
            let s = currentState
            if s != .running {
                _ = wake.wait(timeout: .now() + 0.05)
                continue
            }
            if let output, sm_output_failed(output) != 0 {
                var e = sm_error()
                sm_output_last_error(output, &e)
                errors.withLock { $0.append(.device(DeviceError(e, device: ""))) }
                setState(.failed)
                continue
            }
            if let seq = fadeRequest, let output, sm_output_wait(output, seq, 0) == 1 {
                // The fade at the consumer is done: the session ends where it fell silent.
                fadeRequest = nil
                rebase(at: timeline(forRing: sm_output_stop_index(output)))
                setState(.finished)
                continue
            }
            let t = renderFrame.load(ordering: .relaxed)
            var n = blockFrames
            if let end, fadeRequest == nil {
                if t >= end {
                    finishAtEnd()
                    continue
                }
                n = Int(min(Int64(n), end - t))
            }
            if let output {
                // Refill in bursts: once the ring is full, wait until a quarter of it is
                // free (commands wake us at once), so the render thread wakes a few times
                // a second rather than once per device period.
                let ring = sm_output_ring(output)
                if sm_ring_writable(ring) < UInt32(n) {
                    let quarter = max(UInt32(n), sm_ring_capacity(ring) / 4)
                    _ = sm_output_wait_writable(output, quarter, 500)
                    continue
                }
            }
            renderBlock(frames: n, at: t)
        }
    }

    /// Renders `n` frames at timeline frame `t` into the ring or the file.
    private func renderBlock(frames n: Int, at t: Int64) {
        // The render thread owns the output while it runs (close comes after the join), so
        // it reads the played index directly rather than through `withOutput`'s lock.
        mixer.retire(before: output.map { timeline(forRing: sm_output_played_index($0)) } ?? t)
        block.withUnsafeMutableBufferPointer { buf in
            guard let base = buf.baseAddress else { return }
            mixer.render(into: base, frames: n, at: t)
            if let output {
                _ = sm_ring_write(sm_output_ring(output), base, UInt32(n))
                sm_output_notify(output)
            } else if let writer {
                do throws(AudioError) { try writer.write(base, count: n) } catch {
                    errors.withLock { $0.append(error) }
                    setState(.failed)
                }
            }
        }
        let sourceErrors = mixer.takeErrors()
        if !sourceErrors.isEmpty { errors.withLock { $0.append(contentsOf: sourceErrors) } }
        renderFrame.store(t + Int64(n), ordering: .relaxed)
    }

    /// Makes sure the ring holds the frames the output thread's 5-ms ramp-out will fade
    /// (10 ms), so that a pause or seek right after the ring ran low still fades real
    /// audio rather than stopping short.
    private func topUpForRamp() { fill(upTo: UInt32(sampleRate / 100)) }

    /// Renders until the ring holds `target` frames (or is full, or the session ends).
    private func fill(upTo target: UInt32) {
        guard let output else { return }
        let ring = sm_output_ring(output)
        let capacity = sm_ring_capacity(ring)
        let goal = capacity > UInt32(blockFrames) ? min(target, capacity - UInt32(blockFrames)) : 0
        while sm_ring_readable(ring) < goal, sm_ring_writable(ring) >= UInt32(blockFrames) {
            let t = renderFrame.load(ordering: .relaxed)
            var n = blockFrames
            if let end { n = Int(min(Int64(n), end - t)) }
            guard n > 0 else { return }
            renderBlock(frames: n, at: t)
        }
    }

    /// Plays out what is queued (device) or completes the file.
    private func finishAtEnd() {
        if let output {
            let seq = sm_output_post(output, Int32(SM_REQ_DRAIN.rawValue))
            while sm_output_wait(output, seq, 50) == 0 {
                if !commands.withLock({ $0.isEmpty }) { return }   // a command first (stop, pause, seek)
                if sm_output_failed(output) != 0 { return }
            }
        } else if let writer {
            // A render that met an error (a damaged file) is not written at all.
            if errors.withLock({ $0.isEmpty }) {
                do throws(AudioError) { try writer.finish() } catch { errors.withLock { $0.append(error) } }
            } else {
                writer.discard()
            }
        }
        setState(.finished)
    }
}
