import CAudio
import Dispatch
import Glibc
import Synchronization

/// Where the engine's frames go.
public enum AudioSink: Sendable {
    /// An ALSA PCM, played in real time by the C output thread.
    case device(DeviceConfiguration)
    /// A WAV file, rendered as fast as the CPU goes.
    case file(path: String, format: WAVWriter.SampleFormat)
}

public struct DeviceConfiguration: Sendable, Equatable {
    /// Checked by its one parser (DeviceName): nothing else reaches the backend.
    public var name: DeviceName
    /// Where the device may be kept open between sessions (the daemon's); nil: opened
    /// and closed with the engine. Not part of the comparison.
    public var standby: Standby?
    /// Device buffer and how many periods it has; nil for the backend's default (100 ms in
    /// 4 on ALSA, 500 ms in 4 on PulseAudio, which takes queued audio back on a pause).
    public var bufferMicroseconds: Int?
    public var periods: Int?
    /// Frames the ring between the render thread and the output thread holds.
    public var ringFrames: Int?
    /// Ask for SCHED_FIFO for the output thread.
    public var realtime: Bool

    public init(name: DeviceName = .default, bufferMicroseconds: Int? = nil, periods: Int? = nil,
                ringFrames: Int? = nil, realtime: Bool = true, standby: Standby? = nil) {
        self.name = name
        self.standby = standby
        self.bufferMicroseconds = bufferMicroseconds
        self.periods = periods
        self.ringFrames = ringFrames
        self.realtime = realtime
    }

    public static func == (a: DeviceConfiguration, b: DeviceConfiguration) -> Bool {
        a.name == b.name && a.bufferMicroseconds == b.bufferMicroseconds && a.periods == b.periods
            && a.ringFrames == b.ringFrames && a.realtime == b.realtime
    }
}

/// What the output thread reports.
public struct OutputStatistics: Sendable, Equatable {
    public var framesWritten: UInt64
    public var silenceFrames: UInt64
    public var silenceEvents: Int
    public var xruns: Int
    public var suspends: Int
    public var rewinds: Int
    /// true: SCHED_FIFO granted; false: normal priority; nil: not asked or not started.
    public var realtime: Bool?
    public var realtimeRefusal: String?
    public var paced: Bool
    public var failure: String?
    /// Where the last pause's time went (nil before this engine's first pause).
    public var lastPause: PauseTiming?
}

/// The output thread's account of a pause: when the engine posted it and when its fade went
/// to the device (CLOCK_MONOTONIC, µs, as a request's `at`), and how much the device still
/// held in front of the fade then (ms). What is heard goes quiet about `aheadMs` and a ramp
/// (5 ms) after `writtenAt`.
public struct PauseTiming: Codable, Sendable, Equatable {
    public var postedAt: Int64
    public var writtenAt: Int64
    public var aheadMs: Double
}

/// The engine: a mixer on a render thread feeding a sink.
///
/// The timeline is counted in frames. With a device the clock is the frame actually
/// heard (from the output thread); with a file it is the frame written. Pause, seek and
/// stop act at the consumer: the output thread ramps out within ~5 ms and flushes the
/// ring, and the render thread rewinds to the frame actually played, so nothing is
/// skipped or repeated.
public final class AudioEngine: Sendable {
    public enum State: UInt8, Sendable {
        case idle, running, paused, finished, stopped, failed
    }

    public let sampleRate: Int
    public let sink: AudioSink
    /// The device's settings as negotiated (nil for a file).
    public let deviceInfo: DeviceInfo?
    private let core: EngineCore
    private let thread = Mutex<pthread_t?>(nil)

    public struct DeviceInfo: Sendable, Equatable {
        public let name: String
        public let rate: Int
        public let bufferFrames: Int
        public let periodFrames: Int
        public let ringFrames: Int
        public let sampleFormat: String
        public let canPause: Bool
    }

    /// Opens the sink. For a device, the rate is what the device gave (normally the one
    /// asked for; ALSA's plug layer converts).
    public init(sampleRate: Int = 44100, sink: AudioSink, blockFrames: Int = 1024) throws(AudioError) {
        self.sink = sink
        switch sink {
        case .device(let config):
            // A device kept open between sessions is taken over: it is running already.
            let output: OpaquePointer
            if let warm = config.standby?.take(config, sampleRate: sampleRate) {
                output = warm
            } else {
                output = try Self.openOutput(config, sampleRate: sampleRate)
            }
            let info = sm_output_get_info(output)
            let format: String
            switch Int32(info.format) {
            case Int32(SM_FORMAT_FLOAT.rawValue): format = "float"
            case Int32(SM_FORMAT_S32.rawValue): format = "S32"
            default: format = "S16"
            }
            deviceInfo = DeviceInfo(name: config.name.text, rate: Int(info.rate), bufferFrames: Int(info.buffer_frames),
                                    periodFrames: Int(info.period_frames), ringFrames: Int(info.ring_frames),
                                    sampleFormat: format, canPause: info.can_pause != 0)
            self.sampleRate = Int(info.rate)
            core = EngineCore(sampleRate: Int(info.rate), output: output, writer: nil, blockFrames: blockFrames,
                              standbyKey: (config, sampleRate))
        case .file(let path, let format):
            let writer = try WAVWriter(path: path, sampleRate: sampleRate, format: format)
            deviceInfo = nil
            self.sampleRate = sampleRate
            core = EngineCore(sampleRate: sampleRate, output: nil, writer: writer, blockFrames: blockFrames)
        }
    }

    /// Opens the device (its thread not started yet).
    static func openOutput(_ config: DeviceConfiguration, sampleRate: Int) throws(AudioError) -> OpaquePointer {
        var error = sm_error()
        let output = config.name.text.withCString { name -> OpaquePointer? in
            var c = sm_output_config()
            c.device = name
            c.rate = UInt32(sampleRate)
            c.buffer_us = config.bufferMicroseconds.map { UInt32(min(2_000_000, max(10_000, $0))) } ?? 0
            c.periods = config.periods.map { UInt32(min(32, max(2, $0))) } ?? 0
            c.ring_frames = UInt32(config.ringFrames ?? sampleRate)
            c.want_realtime = config.realtime ? 1 : 0
            return sm_output_open(&c, &error)
        }
        guard let output else { throw AudioError.device(DeviceError(error, device: config.name.text)) }
        return output
    }

    deinit {
        core.post(.shutdown)
        join()
        core.close()
    }

    // MARK: control

    /// Adds a voice. Before `start` it is part of the first block; afterwards it is
    /// rendered from the next block (schedule voices ahead of time for exact placement).
    public func add(_ voice: sending Voice) {
        core.post(.add(voice))
    }

    /// Adds an entry to the score: its voice is made when the render reaches it, and
    /// made again after a seek back.
    public func schedule(_ entry: ScoreEntry) {
        core.post(.schedule(entry))
    }

    /// Starts rendering; the session ends at `end` (a timeline frame) or plays until
    /// `stop` when nil. With `heardAt` (CLOCK_MONOTONIC, ns), its first frame is heard at
    /// that instant, the device's own delay subtracted (a ring in several rooms): silence
    /// until then. Reached 1-20 ms late, it leaves out the frames due by then and fades
    /// in; a start that cannot be met is played at no volume (`missedStart`).
    public func start(end: Int64? = nil, heardAt instant: UInt64? = nil) throws(AudioError) {
        try thread.withLock { (t: inout pthread_t?) throws(AudioError) in
            guard t == nil else { return }
            core.post(.setEnd(end))
            if let instant { _ = core.withOutput { sm_output_align($0, instant) } }
            try core.startOutput()
            let box = Unmanaged.passRetained(core).toOpaque()
            var tid = pthread_t()
            core.threadStarting()
            let rc = pthread_create(&tid, nil, { arg in
                guard let arg else { return nil }
                let core = Unmanaged<EngineCore>.fromOpaque(arg).takeRetainedValue()
                core.renderLoop()
                return nil
            }, box)
            guard rc == 0 else {
                core.threadFailed()
                Unmanaged<EngineCore>.fromOpaque(box).release()
                throw AudioError.invalidArgument("cannot start the render thread: \(String(cString: strerror(rc)))")
            }
            t = tid
        }
    }

    /// Sets or moves the end of the session.
    public func setEnd(_ end: Int64?) { core.post(.setEnd(end)) }

    /// Ends the session early on purpose, from the next frame rendered: the rest of the
    /// score is dropped, what sounds fades out over `plan.fade` frames, and the entries
    /// `plan.entries(t)` makes for that frame `t` (an end gong) play to the new end.
    /// Returns at once; `waitUntilDone` waits for the ring-out.
    public func finish(_ plan: FinishPlan) { core.post(.finish(plan)) }

    /// Fades out and freezes the timeline; returns once the output is silent. On
    /// snapserver's pipe the stream goes on with silence meanwhile (its source would dry
    /// out, and every room's client start again).
    public func pause() {
        if case .device(let c) = sink, case .snapcast = c.name.form {
            core.call(.pauseRunning)
        } else {
            core.call(.pause)
        }
    }

    /// Fades out and freezes the timeline, the device kept running on silence meanwhile (a
    /// sit in several rooms: its aligned resume is met to the frame, as on a device the
    /// standby keeps; the card draws what it draws while it plays).
    public func pauseKeepingDevice() { core.call(.pauseRunning) }

    public func resume() { core.call(.resume) }

    /// Goes on so that the first frame after the pause is heard at `instant`
    /// (CLOCK_MONOTONIC, ns), the device's own delay subtracted (a sit in several rooms):
    /// silence until then, as an aligned start.
    public func resume(heardAt instant: UInt64) {
        _ = core.withOutput { sm_output_align($0, instant) }
        core.call(.resume)
    }

    /// Moves the timeline to `frame` (ramping out and in around the jump).
    public func seek(to frame: Int64) { core.call(.seek(max(0, frame))) }

    /// Fades everything out over `frames` starting with what is heard now (the fade is
    /// applied at the consumer, so a deep ring does not delay it); the engine then counts
    /// as finished. Returns at once; `waitUntilDone` waits for the fade.
    public func fadeOutAndFinish(over frames: Int64) {
        core.post(.fadeOut(frames))
    }

    /// Fades out and stops for good: the session's file (if any) is completed and the
    /// device is released.
    public func stop() {
        core.call(.stop)
        join()
        core.close()
    }

    /// Waits until the session reaches its end (or is stopped/failed); nil timeout waits
    /// forever. A finished engine still takes commands (a seek back plays again) until
    /// `stop`.
    @discardableResult
    public func waitUntilDone(timeout: Double? = nil) -> State {
        let deadline = timeout.map { DispatchTime.now() + $0 }
        while true {
            let s = state
            if s == .finished || s == .stopped || s == .failed { return s }
            if let deadline, DispatchTime.now() >= deadline { return s }
            _ = core.doneSignal.wait(timeout: .now() + 0.05)
        }
    }

    private func join() {
        let t = thread.withLock { (t: inout pthread_t?) -> pthread_t? in
            defer { t = nil }
            return t
        }
        if let t { pthread_join(t, nil) }
    }

    // MARK: state

    public var state: State { State(rawValue: core.state.load(ordering: .acquiring)) ?? .failed }

    /// The timeline frame heard now (written now, for a file).
    public var position: Int64 { core.position() }

    /// The timeline frame heard at `ns` (MonotonicClock), a moment ago: the clock carried
    /// back while the device played on. Not across a seek (its new timeline starts at
    /// its target) nor a pause (the clock stands still); a caller that issued a command
    /// since asks for `position`.
    public func position(heardAt ns: UInt64) -> Int64 { core.position(heardAt: ns) }

    /// Errors met while rendering (a damaged file, a lost device, a full disk).
    public var errors: [AudioError] { core.errors.withLock { $0 } }

    /// `body` runs (on the engine's own thread, briefly) each time the engine stops running:
    /// paused, played to its end, stopped or failed. A loop that sleeps while it plays is
    /// woken by it (the daemon's: a session's end is taken up at once).
    public func whenSettled(_ body: @escaping @Sendable () -> Void) {
        core.onSettled.withLock { $0 = body }
    }

    /// How late an aligned start (`start(heardAt:)`) was, in seconds: nil when on time (or
    /// none asked, or not known yet).
    public var missedStart: Double? {
        let ns = core.withOutput { sm_output_align_late($0) } ?? core.closedAlignLate.load(ordering: .relaxed)
        return ns > 0 ? Double(ns) / 1e9 : nil
    }

    /// How much of an aligned start's first audio was left out, in seconds, to meet its
    /// instant (reached 1-20 ms late): nil when none was.
    public var caughtUpStart: Double? {
        let ns = core.withOutput { sm_output_align_skipped($0) } ?? core.closedAlignSkipped.load(ordering: .relaxed)
        return ns > 0 ? Double(ns) / 1e9 : nil
    }

    /// The output thread's counters (kept after the device is closed); nil for a file.
    public var statistics: OutputStatistics? {
        let report = core.withOutput { output -> (stats: sm_output_stats, error: sm_error) in
            var e = sm_error()
            sm_output_last_error(output, &e)
            return (sm_output_get_stats(output), e)
        } ?? core.closedReport.withLock { $0 }
        guard let (stats, e) = report else { return nil }
        var s = stats
        // This engine's share of a device that may have been kept open for sessions before.
        let b = core.baseline
        s.frames_written -= min(s.frames_written, b.frames_written)
        s.silence_frames -= min(s.silence_frames, b.silence_frames)
        s.silence_events -= min(s.silence_events, b.silence_events)
        s.xruns -= min(s.xruns, b.xruns)
        s.suspends -= min(s.suspends, b.suspends)
        s.rewinds -= min(s.rewinds, b.rewinds)
        let pause = s.pauses > b.pauses
            ? PauseTiming(postedAt: Int64(clamping: s.pause_posted_ns / 1000), writtenAt: Int64(clamping: s.pause_written_ns / 1000),
                          aheadMs: (Double(s.pause_ahead_frames) * 1000 / Double(sampleRate) * 100).rounded() / 100)
            : nil
        let failure: String? = s.failed != 0 ? DeviceError(e, device: deviceInfo?.name ?? "").description : nil
        return OutputStatistics(
            framesWritten: s.frames_written, silenceFrames: s.silence_frames, silenceEvents: Int(s.silence_events),
            xruns: Int(s.xruns), suspends: Int(s.suspends), rewinds: Int(s.rewinds),
            realtime: s.realtime < 0 ? nil : s.realtime == 1,
            realtimeRefusal: s.realtime == 0 && s.rt_errno != 0 ? String(cString: strerror(s.rt_errno)) : nil,
            paced: s.paced != 0, failure: failure, lastPause: pause)
    }
}

extension DeviceError {
    init(_ e: sm_error, device: String) {
        // One line, whatever an ALSA plugin put in its message.
        let message = withUnsafeBytes(of: e.message) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }.split(whereSeparator: \.isNewline).joined(separator: " ")
        let kind: Kind
        switch UInt32(e.code) {
        case SM_ERR_NO_DEVICE.rawValue: kind = .noDevice
        case SM_ERR_BUSY.rawValue: kind = .busy
        case SM_ERR_FORMAT.rawValue: kind = .format
        case SM_ERR_THREAD.rawValue: kind = .thread
        case SM_ERR_MEMORY.rawValue: kind = .memory
        case SM_ERR_DEVICE_LOST.rawValue: kind = .lost
        default: kind = .configuration
        }
        self.init(kind: kind, device: device, message: message, alsaError: e.alsa_errno,
                  soundServer: e.sound_server != 0)
    }
}
