// The web app's API: who may ask (a paired device's token, a matching Origin for every
// change), what a request may carry, and the routes, each a thin translation to the
// daemon's typed protocol or to the store.
import FoundationEssentials
import Glibc
import Logging
import StillMomentControl
import StillMomentCore

public final class WebAPI {
    /// What to do with a request's body, decided from its head.
    enum Plan {
        case refuse(Response)
        case buffer
        case file(Upload)
    }

    /// What a request comes to.
    enum Outcome {
        case respond(Response)
        /// Server-sent events from now on, for this paired device.
        case stream(device: Int64)
        /// An answer computed on a worker thread (an import's analysis).
        case background(@Sendable () -> Response)
        /// A request to the daemon, sent over the web app's one connection (DaemonLink).
        case daemon(DaemonRequest)
    }

    /// A request to the daemon: answered when the daemon answers, or, when it is late,
    /// after `patience` seconds with what `late` says.
    struct DaemonRequest {
        var request: Request
        var command: ControlCommand { request.command }
        /// Whether a daemon is started for it when none runs.
        var start: Bool
        /// How long the link waits for the daemon's answer (a start included).
        var timeout: Double
        /// How long the browser waits for it.
        var patience: Double
    }

    /// How long /api/status waits for the daemon before it says the daemon is not answering.
    public static let statusPatience = 0.04

    /// A request to the daemon, never waited for on the HTTP thread: a daemon that is slow,
    /// held or restarting delays that answer only, never the pages or another browser.
    static func daemon(_ request: Request, start: Bool) -> Outcome {
        let timeout = start ? 20.0 : 5.0
        return .daemon(DaemonRequest(request: request, start: start, timeout: timeout,
                                     patience: request == .status ? statusPatience : timeout + 1))
    }

    /// What a browser is told when the daemon's answer is late (the link stands as `health`).
    static func late(_ command: ControlCommand, health: DaemonLink.Health) -> Response {
        let why = health == .starting ? "starting" : "not answering"
        if command == .status { return .json(.object(["state": .string("idle"), "daemon": .string(why)])) }
        return .error(504, "daemon", health == .starting ? tr("the daemon is starting: try again", "der Daemon startet gerade: bitte noch einmal")
                                                         : tr("the daemon does not answer", "der Daemon antwortet nicht"))
    }

    let store: LibraryStore
    let log: Logger
    /// Served over TLS: the cookie is `Secure` too.
    let secure: Bool
    static let maxJSONBody = 64 * 1024
    static let cookieName = "sm_token"
    private var lastTouched: [Int64: Double] = [:]

    public init(store: LibraryStore, secure: Bool, log: Logger) {
        self.store = store
        self.secure = secure
        self.log = log
    }

    // MARK: the head: who asks, and may the body come

    func plan(_ r: HTTPRequest, maxUpload: Int64) -> Plan {
        guard r.path.hasPrefix("/api/") else {
            guard r.method == "GET" || r.method == "HEAD" else { return .refuse(.error(405, "method", tr("only GET here", "hier nur GET"))) }
            return r.contentLength == 0 ? .buffer : .refuse(.error(413, "too-large", tr("a GET has no body", "ein GET hat keinen Inhalt")))
        }
        if Self.isSync(r) { return planSync(r) }
        if r.method != "GET" && r.method != "HEAD", let refusal = crossSite(r) { return .refuse(refusal) }
        if r.path != "/api/pair" && device(r) == nil { return .refuse(Self.unpaired) }
        if r.path == "/api/import" {
            guard r.method == "PUT" else { return .refuse(.error(405, "method", tr("an upload is a PUT", "ein Hochladen ist ein PUT"))) }
            guard r.header("content-length") != nil else {
                return .refuse(.error(411, "length", tr("an upload needs a Content-Length", "ein Hochladen braucht eine Content-Length")))
            }
            guard Int64(r.contentLength) <= maxUpload else {
                return .refuse(.error(413, "too-large", tr("the file is larger than the limit of \(Self.megabytes(maxUpload))",
                                                           "die Datei ist größer als die Grenze von \(Self.megabytes(maxUpload))")))
            }
            guard r.contentLength > 0 else { return .refuse(.error(400, "empty", tr("the file is empty", "die Datei ist leer"))) }
            let free = store.freeBytes()
            // Room for the upload and the store's own copy of it, and a reserve.
            guard Int64(r.contentLength) * 2 + (16 << 20) <= free else {
                return .refuse(.error(507, "no-space", tr("not enough room on the device (\(Self.megabytes(free)) free)",
                                                          "nicht genug Platz auf dem Gerät (\(Self.megabytes(free)) frei)")))
            }
            let name = Self.fileName(r.query["name"] ?? "upload.mp3")
            do throws(WebError) {
                return .file(try Upload(home: store.home, name: name))
            } catch {
                return .refuse(.error(500, "io", error.description))
            }
        }
        guard r.contentLength <= Self.maxJSONBody else {
            return .refuse(.error(413, "too-large", tr("a request is limited to 64 KiB", "eine Anfrage hat höchstens 64 KiB")))
        }
        return .buffer
    }

    static var unpaired: Response {
        .error(401, "unpaired", tr("this browser is not paired: run `stillmoment web pair` on the device and enter the PIN",
                                   "dieser Browser ist nicht gekoppelt: `stillmoment web pair` auf dem Gerät ausführen und die PIN eingeben"))
    }

    /// A change asked from another site (CSRF): refused unless Origin names this host.
    func crossSite(_ r: HTTPRequest) -> Response? {
        let refusal = Response.error(403, "origin", tr("a change must come from this page (Origin)", "eine Änderung muss von dieser Seite kommen (Origin)"))
        guard let origin = r.header("origin"), let host = r.header("host"), !host.isEmpty else { return refusal }
        return origin == (secure ? "https://" : "http://") + host ? nil : refusal
    }

    /// The paired device whose token the request carries.
    func device(_ r: HTTPRequest) -> WebDevice? {
        guard let token = r.cookie(Self.cookieName),
              let d = try? PairingStore(store: store).device(token: token) else { return nil }
        let now = Date().timeIntervalSince1970
        if now - (lastTouched[d.id] ?? 0) > 60 {
            lastTouched[d.id] = now
            try? PairingStore(store: store).touch(d.id, now: now)
        }
        return d
    }

    // MARK: routes

    func handle(_ r: HTTPRequest, body: [UInt8], upload: Upload?) -> Outcome {
        if !r.path.hasPrefix("/api/") { return .respond(Shell.file(r)) }
        if Self.isSync(r) { return .respond(handleSync(r, body: body)) }
        var parts = r.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst(2).map(String.init)
        if parts.last == "" { parts.removeLast() }
        let json: JSON
        if body.isEmpty {
            json = .object([:])
        } else {
            guard let parsed = try? JSONParser.parse(body) else {
                return .respond(.error(400, "malformed-json", tr("the body is not JSON", "der Inhalt ist kein JSON")))
            }
            json = parsed
        }
        if let refusal = Self.deviceRefusal(json) { return .respond(refusal) }
        let args: [String: JSON]
        if case .object(let o) = json { args = o } else {
            return .respond(.error(400, "malformed-json", tr("the body is a JSON object", "der Inhalt ist ein JSON-Objekt")))
        }
        switch (r.method, parts.first ?? "", parts.count) {
        case ("POST", "pair", 1): return .respond(pair(args, r))
        case ("GET", "me", 1):
            guard let d = device(r) else { return .respond(Self.unpaired) }
            return .respond(.json(.object(["device": .object(["id": .number(Double(d.id)), "name": .string(d.name)])])))
        case ("POST", "logout", 1):
            if let d = device(r) { _ = try? PairingStore(store: store).revoke(d.id) }
            return .respond(.json(.object([:]), headers: [("Set-Cookie", "\(Self.cookieName)=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0")]))
        case ("GET", "status", 1): return Self.daemon(.status, start: false)
        case ("GET", "events", 1):
            guard let d = device(r) else { return .respond(Self.unpaired) }
            return .stream(device: d.id)
        case ("GET", "options", 1): return .respond(options())
        case ("POST", "timer", 1):
            do throws(ProtocolError) {
                return Self.daemon(.timer(try TimerStartRequest(args: args)), start: true)
            } catch {
                return .respond(.error(422, error.code.rawValue, error.message))
            }
        case ("POST", "pause", 1), ("POST", "resume", 1), ("POST", "stop", 1), ("POST", "finish", 1):
            guard args.isEmpty, let command = ControlCommand(rawValue: parts[0]), let request = try? Request(command, args: [:]) else {
                return .respond(.error(422, "bad-arguments", tr("\(parts[0]) takes no arguments", "\(parts[0]) nimmt keine Argumente")))
            }
            return Self.daemon(request, start: false)
        case ("POST", "seek", 1):
            do throws(ProtocolError) {
                // Counted from when it reached this server (a phone's clock is not this machine's).
                var seek = try SeekRequest(args: args)
                seek.at = SeekRequest.stampNow()
                return Self.daemon(.seek(seek), start: false)
            } catch {
                return .respond(.error(422, error.code.rawValue, error.message))
            }
        case ("POST", "play", 1):
            do throws(ProtocolError) {
                // A `device` never gets here (deviceRefusal above).
                let play = try PlayRequest(args: args)
                return Self.daemon(.play(play), start: true)
            } catch {
                return .respond(.error(422, error.code.rawValue, error.message))
            }
        case ("GET", "meditations", 1): return .respond(meditations())
        case ("POST", "meditations", 2): return .respond(edit(parts[1], args))
        case ("DELETE", "meditations", 2): return .respond(delete(parts[1], force: r.query["force"] == "1"))
        case ("PUT", "import", 1):
            guard let upload else { return .respond(.error(400, "empty", tr("no file came with the upload", "mit dem Hochladen kam keine Datei"))) }
            return .background(importJob(upload))
        case ("GET", "practice", 1): return .respond(practice())
        case ("GET", "schedules", 1): return .respond(schedules())
        case ("POST", "schedules", 2): return .respond(setSchedule(parts[1], args))
        case ("POST", "schedules", 3) where parts[2] == "ring":
            guard let n = Int64(parts[1]) else {
                return .respond(.error(404, "not-found", tr("no schedule entry \(Display.clean(String(parts[1].prefix(20))))",
                                                            "kein Eintrag \(Display.clean(String(parts[1].prefix(20)))) im Zeitplan")))
            }
            return Self.daemon(.ringNow(id: n), start: true)
        default:
            return .respond(.error(404, "not-found", tr("no such thing: \(r.method) \(Display.clean(String(r.path.prefix(100))))",
                                                        "gibt es nicht: \(r.method) \(Display.clean(String(r.path.prefix(100))))")))
        }
    }

    /// Whether a device is still paired (an event stream of a revoked one is closed).
    func isPaired(_ id: Int64) -> Bool {
        guard let devices = try? PairingStore(store: store).devices() else { return true }
        return devices.contains { $0.id == id }
    }

    // MARK: pairing

    /// Wrong PINs are counted in the catalog per client address and in all (PairingLockout:
    /// 5 a minute lock an address, 20 a minute everyone), so a restart forgets none.
    private func pair(_ args: [String: JSON], _ r: HTTPRequest) -> Response {
        let now = Date().timeIntervalSince1970
        if let unknown = args.keys.sorted().first(where: { $0 != "pin" && $0 != "name" }) {
            return .error(422, "bad-arguments", tr("unknown field '\(Display.clean(String(unknown.prefix(40))))'; pairing takes pin and name",
                                                   "unbekanntes Feld '\(Display.clean(String(unknown.prefix(40))))'; das Koppeln nimmt pin und name"))
        }
        let pin = args["pin"]?.string ?? ""
        let name = args["name"]?.string ?? "browser"
        let address = r.peer.isEmpty ? "?" : r.peer
        do throws(CoreError) {
            switch try PairingStore(store: store).attempt(pin: String(pin.prefix(16)), deviceName: String(name.prefix(200)), address: address, now: now) {
            case .locked(let lock):
                log.notice("pairing from \(address) refused: locked \(lock.everyone ? "for everyone" : "for this address") for \(Int(lock.until - now) + 1) s")
                let message = lock.everyone
                    ? tr("too many wrong PINs from this network: try again in a minute", "zu viele falsche PINs aus diesem Netz: in einer Minute wieder")
                    : tr("too many wrong PINs: try again in a minute", "zu viele falsche PINs: in einer Minute wieder")
                return Response.error(429, "locked", message).with(("Retry-After", String(max(1, Int(lock.until - now) + 1))))
            case .wrong(let left):
                log.notice("a wrong pairing PIN from \(address) (\(left) more before a minute's lock)")
                return .error(403, "wrong-pin", tr("wrong or expired PIN", "falsche oder abgelaufene PIN"))
            case .paired(let device, let token):
                log.notice("paired device \(device.id) (\(device.name)) from \(address)")
                let cookie = "\(Self.cookieName)=\(token); HttpOnly; SameSite=Strict; Path=/; Max-Age=\(10 * 365 * 86400)" + (secure ? "; Secure" : "")
                return .json(.object(["device": .object(["id": .number(Double(device.id)), "name": .string(device.name)])]), headers: [("Set-Cookie", cookie)])
            }
        } catch {
            return .error(500, "failed", error.description)
        }
    }

    // MARK: the daemon

    /// The daemon's answer (or why there is none) as the browser's.
    static func answer(_ command: ControlCommand, _ result: Result<JSON, ControlError>) -> Response {
        switch result {
        case .success(let json):
            return .json(json)
        case .failure(.noDaemon):
            if command == .status { return .json(JSON(encoding: Status(state: .idle))) }
            return .error(409, ErrorCode.noSession.rawValue, tr("nothing is playing", "es läuft nichts"))
        case .failure(.refused(let code, let words)):
            let status: Int
            switch code {
            case .noSession, .busy: status = 409
            case .badArguments, .badRequest: status = 422
            case .device: status = 503
            case .forbidden: status = 403
            default: status = 500
            }
            // The daemon's words in both languages: said in this browser's.
            return .error(status, code.rawValue, words.text())
        case .failure(let error):
            if command == .status { return .json(.object(["state": .string("idle"), "daemon": .string("not answering")])) }
            return .error(502, "daemon", error.description)
        }
    }

    static func megabytes(_ bytes: Int64) -> String {
        bytes >= 1 << 30 ? "\(bytes / (1 << 30)) GB" : "\(bytes / (1 << 20)) MB"
    }

    /// A browser's file name, as a name only (no folders, no control characters).
    static func fileName(_ raw: String) -> String {
        let last = raw.split(separator: "/").last.map(String.init) ?? raw
        let clean = String(String.UnicodeScalarView(last.unicodeScalars.filter { !Display.isControl($0) && $0 != "\\" }))
        return clean.isEmpty ? "upload.mp3" : String(clean.prefix(200))
    }
}

extension Response {
    func with(_ header: (String, String)) -> Response {
        var r = self
        r.headers.append(header)
        return r
    }
}
