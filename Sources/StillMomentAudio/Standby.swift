// A sound device kept open between sessions (the daemon's `output-standby`): HDMI
// receivers and TVs drop the first second of a stream while they lock on, and many DACs
// pop when the device opens or closes; that first second is the start gong. While an
// output is held here its C thread keeps the device running on silence (SM_REQ_STANDBY,
// standby.c), topped up a period at a time, and the next engine on the same device takes
// it over instead of opening the device: the session starts into a running stream.
// The daemon owns one and hands it to its sessions' engines in DeviceConfiguration.standby;
// engines without one open and close their device as always.
import CAudio
import Synchronization

public final class Standby: Sendable {
    /// One held output and what it was opened with.
    struct Held: @unchecked Sendable {  // the pointer is only used under `held`'s lock
        let configuration: DeviceConfiguration
        let sampleRate: Int
        let output: OpaquePointer
    }

    private let held = Mutex<Held?>(nil)
    private let keep = Atomic<Bool>(false)

    public init() {}

    deinit { release() }

    /// Whether an engine that closes keeps its device open (set by the daemon's policy).
    public var keepsOpen: Bool {
        get { keep.load(ordering: .acquiring) }
        set { keep.store(newValue, ordering: .releasing) }
    }

    /// The device held open now (nil: none), whether it failed meanwhile, and the frames
    /// handed to it since it was opened (silence between sessions included).
    public var heldDevice: (name: String, failed: Bool, framesWritten: UInt64)? {
        held.withLock { h in
            h.map { ($0.configuration.name.text, sm_output_failed($0.output) != 0, sm_output_get_stats($0.output).frames_written) }
        }
    }

    /// Opens `configuration` and keeps it running on silence (nothing if it is held
    /// already; another held device is closed first, as two may share a card).
    public func warm(_ configuration: DeviceConfiguration, sampleRate: Int = 44100) throws(AudioError) {
        if let h = held.withLock({ $0 }), h.configuration == configuration, h.sampleRate == sampleRate,
           sm_output_failed(h.output) == 0 { return }
        release()
        let output = try AudioEngine.openOutput(configuration, sampleRate: sampleRate)
        var error = sm_error()
        guard sm_output_start(output, &error) == 0 else {
            sm_output_close(output)
            throw AudioError.device(DeviceError(error, device: configuration.name.text))
        }
        _ = sm_output_wait(output, sm_output_post(output, Int32(SM_REQ_STANDBY.rawValue)), 3000)
        held.withLock { $0 = Held(configuration: configuration, sampleRate: sampleRate, output: output) }
    }

    /// Closes the held device, if any.
    public func release() {
        let h = held.withLock { h -> Held? in
            defer { h = nil }
            return h
        }
        if let h { sm_output_close(h.output) }
    }

    /// For a new engine: the held output if it is `configuration`'s and well (the engine
    /// owns it from now); else the held one is closed (the engine opens the device).
    func take(_ configuration: DeviceConfiguration, sampleRate: Int) -> OpaquePointer? {
        let h = held.withLock { h -> Held? in
            defer { h = nil }
            return h
        }
        guard let h else { return nil }
        if h.configuration == configuration, h.sampleRate == sampleRate, sm_output_failed(h.output) == 0 {
            return h.output
        }
        sm_output_close(h.output)
        return nil
    }

    /// An engine's output at its close: kept running on silence when the policy says so
    /// (true), else left to the caller to close (false).
    func hold(_ output: OpaquePointer, configuration: DeviceConfiguration, sampleRate: Int) -> Bool {
        var error = sm_error()
        guard keepsOpen, sm_output_failed(output) == 0, sm_output_start(output, &error) == 0 else { return false }
        _ = sm_output_wait(output, sm_output_post(output, Int32(SM_REQ_STANDBY.rawValue)), 3000)
        let before = held.withLock { h -> Held? in
            defer { h = Held(configuration: configuration, sampleRate: sampleRate, output: output) }
            return h
        }
        if let before { sm_output_close(before.output) }
        return true
    }
}
