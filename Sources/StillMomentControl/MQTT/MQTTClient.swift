// The Swift side of the C MQTT client (Sources/CMQTT): a connection kept by libmosquitto's own
// thread, an fd for the daemon's poll set, and calls that only queue (never block).
import CMQTT
import StillMomentCore

/// One connection to a broker (libmosquitto loaded on the first one made).
public final class MQTTClient {
    enum Incoming: Equatable {
        case connected(code: Int32)
        case disconnected(code: Int32)
        case message(topic: String, payload: [UInt8])
        /// Too long, or the queue was full: the topic (maybe empty), for the log.
        case dropped(topic: String)
    }

    private let handle: OpaquePointer
    private var event = sm_mqtt_event()

    /// Starts connecting in the background; throws when libmosquitto is missing or refuses
    /// the options. Every string has passed MQTTConfig's guard.
    init(clientID: String, broker: MQTTBroker, user: String?, password: String?, tlsCA: String?, will: String) throws(CoreError) {
        var err = [CChar](repeating: 0, count: 256)
        let h = sm_mqtt_open(clientID, broker.host, Int32(broker.port), 30, user, password, tlsCA, will, &err, err.count)
        guard let h else {
            throw CoreError.badRequest(.same("MQTT: " + MQTTConfig.text(err)))
        }
        handle = h
    }

    /// Readable while something came in: call `next()` until it says nil.
    var fd: Int32 { sm_mqtt_fd(handle) }

    func next() -> Incoming? {
        let kind = sm_mqtt_next(handle, &event)
        var e = event     // a copy: read field by field below
        switch Int(kind) {
        case Int(SM_MQTT_CONNECTED): return .connected(code: e.code)
        case Int(SM_MQTT_DISCONNECTED): return .disconnected(code: e.code)
        case Int(SM_MQTT_MESSAGE):
            let length = e.length
            let topic = withUnsafeBytes(of: &e.topic) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            let payload = withUnsafeBytes(of: &e.payload) { Array($0.prefix(min(length, $0.count))) }
            return .message(topic: topic, payload: payload)
        case Int(SM_MQTT_DROPPED):
            let topic = withUnsafeBytes(of: &e.topic) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            return .dropped(topic: topic)
        default: return nil
        }
    }

    /// Queued for the network thread; false when libmosquitto refused it (not connected).
    @discardableResult
    func publish(_ topic: String, _ payload: String, retain: Bool, qos: Int32 = 0) -> Bool {
        let bytes = Array(payload.utf8)
        return bytes.withUnsafeBytes { sm_mqtt_publish(handle, topic, $0.baseAddress, bytes.count, qos, retain ? 1 : 0) } == 0
    }

    func subscribe(_ pattern: String) { _ = sm_mqtt_subscribe(handle, pattern, 1) }

    /// Says `offline` (retained) on `availability`, disconnects cleanly and frees the client
    /// (waits at most `timeoutMs` for the broker).
    func close(availability: String, timeoutMs: Int32 = 1000) {
        sm_mqtt_close(handle, availability, "offline", timeoutMs)
    }

    /// nil when libmosquitto loads (it stays loaded in this process), else why not.
    public static func unavailable() -> String? {
        var err = [CChar](repeating: 0, count: 256)
        return sm_mqtt_available(&err, err.count) == 1 ? nil : MQTTConfig.text(err)
    }

    static func strerror(_ code: Int32) -> String { String(cString: sm_mqtt_strerror(code)) }
}
