// The sound device is the daemon's (the local user's settings and presets), never the web's:
// one check, applied to every request body before any route reads it, refuses a `device`
// key wherever it sits (`/api/timer`'s options, `/api/play`, any nested object). ALSA's
// `file` plugin runs `FILE="|cmd"`, so a device name from the network would be a command.
import StillMomentControl
import StillMomentCore

extension WebAPI {
    /// 422 `bad-arguments` when the body names a sound device anywhere; nil otherwise.
    static func deviceRefusal(_ body: JSON) -> Response? {
        namesDevice(body)
            ? .error(422, "bad-arguments", tr("the device is the daemon's", "das Gerät ist Sache des Daemons"))
            : nil
    }

    /// Whether `json` has a key `device` at any depth (the body's parser nests at most
    /// `JSONParser.maxDepth` deep, so the recursion is bounded).
    private static func namesDevice(_ json: JSON) -> Bool {
        switch json {
        case .object(let o): return o.keys.contains("device") || o.values.contains(where: namesDevice)
        case .array(let a): return a.contains(where: namesDevice)
        default: return false
        }
    }
}
