// The hub's side of sync, on the web listener: a device pairs with the PIN `stillmoment web
// pair` shows (the same PIN, lockout and revocable token as a browser), then uploads its
// changes and reads the hub's by cursor. A device's token travels as `Authorization: Bearer`,
// never as a cookie, so no page in a browser can send it (no Origin check needed). Each
// route is a translation to Core's SyncService, which holds every rule.
import FoundationEssentials
import StillMomentControl
import StillMomentCore

extension WebAPI {
    /// An upload of changes is limited to this many bytes (SyncService.batchLimit changes
    /// of typical size fit in well under it; the device splits by size too).
    static let maxSyncBody = 4 << 20

    static func isSync(_ r: HTTPRequest) -> Bool { r.path.hasPrefix("/api/sync/") }

    /// The head of a sync request: the pairing needs no token; everything else a paired
    /// device's bearer token.
    func planSync(_ r: HTTPRequest) -> Plan {
        if r.path != "/api/sync/pair" && syncDevice(r) == nil {
            return .refuse(.error(401, "unpaired", tr("this device is not paired with the hub: `stillmoment sync pair URL --pin PIN`",
                                                      "dieses Gerät ist nicht mit dem Hub gekoppelt: `stillmoment sync pair URL --pin PIN`")))
        }
        let limit = r.path == "/api/sync/push" ? Self.maxSyncBody : r.path.hasPrefix("/api/sync/file/") ? SyncFiles.chunkBytes : Self.maxJSONBody
        guard r.contentLength <= limit else {
            return .refuse(.error(413, "too-large", tr("a sync request is limited to \(limit / 1024) KiB", "eine Sync-Anfrage hat höchstens \(limit / 1024) KiB")))
        }
        return .buffer
    }

    /// The device whose bearer token the request carries.
    func syncDevice(_ r: HTTPRequest) -> WebDevice? {
        guard let header = r.header("authorization"), header.hasPrefix("Bearer ") else { return nil }
        return try? PairingStore(store: store).device(token: String(header.dropFirst(7)), scope: .sync)
    }

    func handleSync(_ r: HTTPRequest, body: [UInt8]) -> Response {
        let sync = SyncService(store: store)
        do throws(SyncError) {
            switch (r.method, r.path) {
            case ("POST", "/api/sync/pair"):
                return syncPair(body, r, hub: try sync.node())
            case ("POST", "/api/sync/push"):
                let upload: SyncUpload
                do { upload = try JSON.decode(SyncUpload.self, from: body, strict: true) } catch {
                    return .error(422, "sync-refused", tr("not an upload of changes: \(error)", "kein Hochladen von Änderungen: \(error)"))
                }
                let epoch = try sync.epoch(seenCursor: upload.cursor)
                let received = try sync.receiving(upload.changes)
                if received.changed > 0, let d = syncDevice(r) { log.info("sync: \(received.changed) field(s) from device \(d.id) (\(d.name))") }
                var answer: [String: JSON] = ["hub": .string(try sync.node()), "taken": .number(Double(upload.changes.count)), "epoch": .string(epoch),
                                              "kinds": .array(SyncKind.allCases.map { .string($0.rawValue) })]
                if let stored = received.stored {
                    answer["stored"] = .array([.number(Double(stored.lowerBound)), .number(Double(stored.upperBound))])
                }
                return .json(.object(answer))
            case ("GET", "/api/sync/pull"):
                let after = r.query["after"].flatMap { Int64($0) } ?? 0
                guard after >= 0 else { return .error(422, "bad-arguments", tr("after is a cursor (0 or more)", "after ist ein Zeiger (0 oder mehr)")) }
                if let d = syncDevice(r) {
                    try sync.noteRead(device: d.id, cursor: after)
                    // Deletes every device has read leave the journal (looked at on each page a
                    // device reads past the start).
                    if after > 0, let paired = try? PairingStore(store: store).devices() {
                        let collected = try sync.collect(paired: Set(paired.map(\.id)))
                        if collected > 0 { log.info("sync: \(collected) delete(s) read by every device collected") }
                    }
                }
                let epoch = try sync.epoch(seenCursor: after)
                let page = try sync.changes(after: after)
                return .json(JSON(encoding: SyncPage(hub: try sync.node(), changes: page.changes, next: page.next, more: page.more,
                                                     time: SyncJournal.wallMilliseconds(), last: page.last, epoch: epoch)))
            case ("GET", "/api/sync/files"):
                // The contents this hub waits for (meditations whose rows came before their
                // files), with what it holds of each: a device that has one sends it. Parts
                // nothing waits for any more (their records deleted meanwhile) are swept first.
                SyncFiles.sweep(store: store)
                let wanted = try SyncFiles.wanted(store: store).map { w -> JSON in
                    .object(["hash": .string(w.hash), "size": .number(Double(w.size)), "have": .number(Double(w.have))])
                }
                return .json(.object(["hub": .string(try sync.node()), "wanted": .array(wanted)]))
            case ("GET", let path) where path.hasPrefix("/api/sync/file/"):
                return try syncFileRead(String(path.dropFirst("/api/sync/file/".count)), r)
            case ("PUT", let path) where path.hasPrefix("/api/sync/file/"):
                let hash = String(path.dropFirst("/api/sync/file/".count))
                guard let offset = r.query["offset"].flatMap({ Int64($0) }), offset >= 0 else {
                    return .error(422, "bad-arguments", tr("offset is where the bytes go (0 or more)", "offset ist, wohin die Bytes gehören (0 oder mehr)"))
                }
                let outcome = try SyncFiles.append(hash, offset: offset, bytes: body, store: store)
                switch outcome {
                case .more(let have): return .json(.object(["have": .number(Double(have))]))
                case .unwanted: return .json(.object(["unwanted": .bool(true)]))
                case .adopted(let ids):
                    log.info("sync: the file \(hash) arrived whole for \(ids.count) meditation(s)")
                    return .json(.object(["adopted": .array(ids.map(JSON.string))]))
                }
            default:
                return .error(404, "not-found", tr("no such thing: \(r.method) \(Display.clean(String(r.path.prefix(100))))",
                                                   "gibt es nicht: \(r.method) \(Display.clean(String(r.path.prefix(100))))"))
            }
        } catch {
            switch error {
            case .refused, .clockAhead:
                log.notice("sync: refused from \(r.peer): \(error.text(.en))")
                return .error(422, error.code, error.description)
            case .store, .unreachable, .busy, .stopped:
                return .error(500, "failed", error.description)
            }
        }
    }

    /// Bytes of a stored file by its content hash: `Range: bytes=FIRST-[LAST]` (206, at most
    /// SyncFiles.chunkBytes a request) or the first chunk (200, `X-Content-Size` the whole).
    private func syncFileRead(_ hash: String, _ r: HTTPRequest) throws(SyncError) -> Response {
        var first: Int64 = 0
        var last: Int64?
        if let range = r.header("range") {
            let spec = range.hasPrefix("bytes=") ? range.dropFirst(6) : ""
            let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let a = Int64(parts[0]), a >= 0, a <= 1 << 50, parts[1].isEmpty || Int64(parts[1]).map({ $0 >= a }) == true else {
                return .error(416, "bad-range", tr("a range of bytes is bytes=FIRST-[LAST]", "ein Bereich von Bytes ist bytes=ERSTES-[LETZTES]"))
            }
            first = a
            last = Int64(parts[1])
        }
        // At most a chunk; `last` may be any number a peer writes (capped before arithmetic).
        let count = Int(min(Int64(SyncFiles.chunkBytes), min(last ?? first + Int64(SyncFiles.chunkBytes), first + Int64(SyncFiles.chunkBytes)) - first + 1))
        guard let (bytes, size) = try SyncFiles.read(hash, offset: first, count: count, store: store) else {
            return .error(404, "not-here", tr("no file of that content here", "keine Datei dieses Inhalts hier"))
        }
        guard first < size || size == 0 else {
            return Response.error(416, "bad-range", tr("the file has \(size) bytes", "die Datei hat \(size) Bytes")).with(("Content-Range", "bytes */\(size)"))
        }
        let headers = [("X-Content-Size", String(size))] + (r.header("range") == nil ? [] : [("Content-Range", "bytes \(first)-\(first + Int64(bytes.count) - 1)/\(size)")])
        return Response(status: r.header("range") == nil ? 200 : 206, contentType: "application/octet-stream", body: bytes, headers: headers)
    }

    /// Where sync stands, for the web app: this node's hub and last cycle (a device), and
    /// how many devices sync with it (a hub). Never a token.
    func syncState() -> JSON {
        let sync = SyncService(store: store)
        guard let status = try? sync.status() else { return .null }
        let paired = Set(((try? PairingStore(store: store).devices()) ?? []).map(\.id))
        var o: [String: JSON] = ["pending": .number(Double(status.pending)),
                                 "devices": .number(Double((try? sync.peers(paired: paired)) ?? 0))]
        if let hub = status.hub { o["hub"] = .string(hub) }
        if let t = status.lastCycle { o["lastCycle"] = .number(t) }
        if let e = status.lastError { o["lastError"] = .string(e) }
        return .object(o)
    }

    private func syncPair(_ body: [UInt8], _ r: HTTPRequest, hub: String) -> Response {
        guard let json = try? JSONParser.parse(body), case .object(let args) = json,
              args.keys.allSatisfy({ $0 == "pin" || $0 == "name" }) else {
            return .error(422, "bad-arguments", tr("pairing takes pin and name", "das Koppeln nimmt pin und name"))
        }
        let now = Date().timeIntervalSince1970
        let address = r.peer.isEmpty ? "?" : r.peer
        do throws(CoreError) {
            switch try PairingStore(store: store).attempt(pin: String((args["pin"]?.string ?? "").prefix(16)),
                                                          deviceName: String((args["name"]?.string ?? "device").prefix(200)),
                                                          address: address, now: now, scope: .sync) {
            case .locked(let lock):
                return Response.error(429, "locked", tr("too many wrong PINs: try again in a minute", "zu viele falsche PINs: in einer Minute wieder"))
                    .with(("Retry-After", String(max(1, Int(lock.until - now) + 1))))
            case .wrong:
                log.notice("sync: a wrong pairing PIN from \(address)")
                return .error(403, "wrong-pin", tr("wrong or expired PIN (`stillmoment web pair` on the hub shows one)",
                                                   "falsche oder abgelaufene PIN (`stillmoment web pair` auf dem Hub zeigt eine)"))
            case .paired(let device, let token):
                log.notice("sync: paired device \(device.id) (\(device.name)) from \(address)")
                // From now on it holds back the collection of deletes until it has read them.
                try? SyncService(store: store).noteRead(device: device.id, cursor: 0)
                return .json(.object(["hub": .string(hub), "token": .string(token), "device": .number(Double(device.id))]))
            }
        } catch {
            return .error(500, "failed", error.description)
        }
    }
}
