// What the first open of a device loads, loaded ahead: ALSA's configuration (with its
// hooks: on a system with ALSA's PulseAudio plugin they load libpulse and some twenty
// libraries it needs) or libpulse for a pulse device. Measured on this machine: the
// daemon's first session started in 40-54 ms against 10-30 ms for the next ones, most of
// the difference that load; in the rig's emulated guest hundreds of ms. The daemon starts
// it when it listens, on a thread of its own; an open meanwhile waits for it (alsa-lib's
// lock, pthread_once for libpulse) rather than doing it again.
import CAudio

public enum DeviceWarmup {
    /// Starts loading what opening `device` needs; returns at once. False when no thread could be started.
    @discardableResult
    public static func begin(device: String) -> Bool {
        sm_backend_warm(device) == 0
    }
}
