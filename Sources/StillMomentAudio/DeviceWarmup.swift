// What the first open of a device loads, loaded ahead: ALSA's configuration (with its
// hooks: on a system with ALSA's PulseAudio plugin they load libpulse and some twenty
// libraries it needs) or libpulse for a pulse device: 5.9 ms of the first open of `null`
// on this machine (0.04 ms once loaded), many times that on a Pi or in the sound-card
// rig's emulated guest, and about 1.4 MB of the memory peak at the daemon's first session
// (bench/daemon.py). The daemon starts it when it listens, on a thread of its own; an
// open meanwhile waits until it is done (sm_backend_open), so ALSA's shared configuration
// is never expanded by two threads at once.
import CAudio

public enum DeviceWarmup {
    /// Starts loading what opening `device` needs; returns at once. False when no thread could be started.
    @discardableResult
    public static func begin(device: DeviceName) -> Bool {
        sm_backend_warm(device.text) == 0
    }

    /// Waits until the warm-ups started are done, at most `milliseconds`; true when none runs.
    @discardableResult
    public static func finish(milliseconds: Int32 = 2000) -> Bool {
        sm_backend_warm_finish(milliseconds) == 1
    }
}
