/// A device's side of sync: pairing with a hub, and a cycle — upload what waits (the hub
/// merges each upload in one transaction; what it took stops waiting), then read the hub's
/// changes page by page from this device's cursor (each page merged, applied and the cursor
/// moved in one transaction). A cycle cut anywhere loses nothing and duplicates nothing: an
/// upload not acknowledged is sent again (merging it twice changes nothing), a page not
/// committed is read again.
import FoundationEssentials
import Glibc
import StillMomentCore

public struct SyncPeer: Sendable {
    public let store: LibraryStore
    public init(store: LibraryStore) { self.store = store }

    /// What a cycle did.
    public struct Report: Sendable, Equatable, Codable {
        public var uploaded = 0
        public var downloaded = 0
        /// Fields that changed here.
        public var changed = 0
        public var hub = ""
        /// Meditations' files sent to the hub whole, and fetched from it whole.
        public var filesSent = 0
        public var filesFetched = 0
        /// Bytes of files moved either way.
        public var fileBytes: Int64 = 0
        /// The hub was behind this device's cursor (restored from an older backup): read again
        /// from the start; everything here goes up again in the next cycle.
        public var hubWentBack = false
    }

    /// Pairs this device with the hub at `url` with the PIN its `stillmoment web pair` shows.
    /// Over https the hub's certificate is pinned: the one it shows now, or `fingerprint`
    /// (as `openssl x509 -fingerprint -sha256` prints it), which it must show.
    public func pair(url: String, pin: String, name: String, fingerprint: String? = nil) throws(SyncError) -> SyncService.Hub {
        var pinned: String?
        if let fingerprint {
            guard let fp = HTTPClient.fingerprint(fingerprint) else {
                throw .refused(both("'\(Display.clean(String(fingerprint.prefix(100))))' is not a SHA-256 fingerprint (64 hex digits, colons allowed)",
                                    "'\(Display.clean(String(fingerprint.prefix(100))))' ist kein SHA-256-Fingerabdruck (64 Hex-Ziffern, Doppelpunkte erlaubt)"))
            }
            pinned = fp
        }
        // The name first: nothing is paired under a name this device would refuse.
        do { _ = try Names.check(name, option: "--name", maxLength: 64) } catch { throw .refused(error.words) }
        let client = try HTTPClient(url: url, pinned: pinned)
        if pinned != nil && !client.secure {
            throw .refused(both("a fingerprint goes with an https:// hub", "ein Fingerabdruck gehört zu einem https://-Hub"))
        }
        let body = JSON.object(["pin": .string(pin), "name": .string(name)]).line
        let answer = try client.send("POST", "/api/sync/pair", body: Array(body.utf8))
        let json = try Self.answer(answer)
        guard let token = json["token"]?.string, token.utf8.count == 64,
              token.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }),
              let hub = json["hub"]?.string, HybridTimestamp.isNodeID(hub) else {
            throw .refused(both("the hub's answer to the pairing is not ours", "die Antwort des Hubs auf das Koppeln ist nicht von uns"))
        }
        let service = SyncService(store: store)
        guard hub != (try service.node()) else {
            throw .refused(both("that is this device itself: pair it with another node", "das ist dieses Gerät selbst: kopple es mit einem anderen Knoten"))
        }
        let paired = SyncService.Hub(url: url.hasSuffix("/") ? String(url.dropLast()) : url, token: token, node: hub,
                                     fingerprint: client.secure ? answer.fingerprint : nil)
        try service.setHub(paired)
        try service.setDeviceName(name)
        return paired
    }

    /// One cycle with the paired hub. One cycle at a time per home (a lock beside the
    /// catalog: the daemon's and a `sync now` never interleave); `stop` is asked between
    /// requests (the daemon is ending).
    public func cycle(stop: @Sendable () -> Bool = { false }) throws(SyncError) -> Report {
        let lockPath = store.home + "/sync.lock"
        var lock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
        if lock < 0 && errno == EACCES { lock = open(lockPath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }   // made by another user: flock works read-only
        guard lock >= 0 else {
            throw .store(.io(path: lockPath, reason: .same(String(cString: strerror(errno)))))
        }
        defer { close(lock) }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
            throw .busy
        }
        defer { flock(lock, LOCK_UN) }
        let service = SyncService(store: store)
        guard let hub = try service.hub() else {
            throw .refused(both("this device is not paired with a hub: `stillmoment sync pair URL --pin PIN`",
                                "dieses Gerät ist mit keinem Hub gekoppelt: `stillmoment sync pair URL --pin PIN`"))
        }
        var report = Report(hub: hub.url)
        do {
            try run(service, hub, &report, stop: stop)
            if report.hubWentBack {
                // What it lost goes up at once (everything here is waiting again).
                var again = Report(hub: hub.url)
                try run(service, hub, &again, stop: stop)
                report.uploaded += again.uploaded
                report.downloaded += again.downloaded
                report.changed += again.changed
                report.filesSent += again.filesSent
                report.filesFetched += again.filesFetched
                report.fileBytes += again.fileBytes
            }
            try service.noteCycle(error: nil, at: Date().timeIntervalSince1970)
        } catch {
            if case .stopped = error {} else { try? service.noteCycle(error: error.text(.en), at: Date().timeIntervalSince1970) }
            throw error
        }
        return report
    }

    private func run(_ service: SyncService, _ hub: SyncService.Hub, _ report: inout Report, stop: () -> Bool) throws(SyncError) {
        let client = try HTTPClient(url: hub.url, pinned: hub.fingerprint)
        if client.secure && hub.fingerprint == nil {
            throw .refused(both("no certificate was pinned for this https hub: pair again (`stillmoment sync pair`)",
                                "für diesen https-Hub ist kein Zertifikat festgehalten: neu koppeln (`stillmoment sync pair`)"))
        }
        let auth = [("Authorization", "Bearer \(hub.token)")]
        let node = try service.node()
        // Upload, in batches the hub's limit takes.
        while true {
            if stop() { throw .stopped }
            let pending = try service.pending()
            if pending.isEmpty { break }
            var batch: [SyncChange] = []
            var bytes = 0
            for c in pending {
                let size = c.value.utf8.count
                if !batch.isEmpty && bytes + size > SyncJournal.pageBytes { break }
                batch.append(c)
                bytes += size
            }
            let body = JSON(encoding: SyncUpload(node: node, changes: batch, cursor: try service.cursor())).line
            let json = try Self.answer(try client.send("POST", "/api/sync/push", headers: auth, body: Array(body.utf8)))
            guard json["hub"]?.string == hub.node else { throw Self.otherHub }
            // A hub restored from an older backup: everything here waits for it again.
            if try service.heardEpoch(json["epoch"]?.string, hub: hub.node) { report.hubWentBack = true }
            // What the hub took: the kinds it knows (an older hub passes over the others,
            // which wait here until it knows them).
            let known: Set<String>? = json["kinds"].flatMap { k -> Set<String>? in
                guard case .array(let list) = k else { return nil }
                return Set(list.compactMap(\.string))
            }
            let taken = known.map { known in batch.filter { known.contains($0.kind.rawValue) } } ?? batch
            // The hub's sequence numbers this upload alone took: not read back.
            var stored: ClosedRange<Int64>?
            if case .array(let pair)? = json["stored"], pair.count == 2, let a = pair[0].number, let b = pair[1].number,
               a >= 1, b >= a, b < 1e15, a == a.rounded(), b == b.rounded() {
                stored = Int64(a)...Int64(b)
            }
            try service.acknowledge(taken, hub: hub.node, stored: stored)
            if taken.count < batch.count { report.uploaded += taken.count; break }
            report.uploaded += batch.count
            if batch.count == pending.count && pending.count < SyncService.batchLimit { break }
        }
        // Download from the cursor.
        try service.readAgainForNewKinds()
        var pages = 0
        var wentBack = false
        while true {
            if stop() { throw .stopped }
            let cursor = try service.cursor()
            let answer = try client.send("GET", "/api/sync/pull?after=\(cursor)", headers: auth)
            if answer.status != 200 { _ = try Self.answer(answer) }
            let page: SyncPage
            do { page = try JSON.decode(SyncPage.self, from: answer.body, strict: true) } catch {
                throw .refused(both("the hub sent a page that is not ours: \(error)", "der Hub schickte eine Seite, die nicht von uns ist: \(error)"))
            }
            guard page.hub == hub.node else { throw Self.otherHub }
            if try service.heardEpoch(page.epoch, hub: hub.node) {
                // A hub restored from an older backup: read it all again (everything here goes
                // up to it after this read).
                report.hubWentBack = true
                guard !wentBack else { throw .refused(both("the hub's epoch changed twice in one cycle", "die Epoche des Hubs wechselte zweimal in einem Abgleich")) }
                wentBack = true
                continue
            }
            guard page.next >= cursor else { throw .refused(both("the hub's cursor went back", "der Zeiger des Hubs ging zurück")) }
            report.changed += try service.take(page.changes, next: page.next, hubTime: page.time, hub: hub.node)
            report.downloaded += page.changes.count
            pages += 1
            if !page.more || page.next == cursor || pages >= 10_000 { break }
        }
        try sendFiles(client, auth, hub, &report, stop: stop)
        try fetchFiles(service, client, auth, &report, stop: stop)
        SyncFiles.sweep(store: store)
    }

    /// The files the hub waits for that are here go up, from where the hub stopped. A file
    /// that fails (the hub refuses it) does not hold up the others; the first failure is
    /// the cycle's error. An older hub without file sync is passed over.
    private func sendFiles(_ client: HTTPClient, _ auth: [(String, String)], _ hub: SyncService.Hub, _ report: inout Report,
                           stop: () -> Bool) throws(SyncError) {
        let listing = try client.send("GET", "/api/sync/files", headers: auth)
        if listing.status == 404 { return }
        let json = try Self.answer(listing)
        guard json["hub"]?.string == hub.node else { throw Self.otherHub }
        guard case .array(let list)? = json["wanted"] else {
            throw .refused(both("the hub's list of files it waits for is not ours", "die Liste der Dateien, auf die der Hub wartet, ist nicht von uns"))
        }
        var failure: SyncError?
        for item in list.prefix(10_000) {
            guard let hash = item["hash"]?.string, SyncFileFacts.isHash(hash), let have = item["have"]?.number,
                  have >= 0, have < 1e15 else { continue }
            var offset = Int64(have)
            do throws(SyncError) {
                // Each turn moves the hub forward (or ends): at most the file's chunks and one more.
                while true {
                    if stop() { throw .stopped }
                    guard let (bytes, size) = try SyncFiles.read(hash, offset: offset, count: SyncFiles.chunkBytes, store: store),
                          offset <= size else { break }
                    // No bytes at the whole length: the hub has it all and finishes it.
                    let answer = try Self.answer(try fileClient(client).send("PUT", "/api/sync/file/\(hash)?offset=\(offset)", headers: auth, body: bytes))
                    report.fileBytes += Int64(bytes.count)
                    if let next = answer["have"]?.number {
                        guard next > Double(offset), next <= Double(size) else { break }
                        offset = Int64(next)
                        continue
                    }
                    if answer["adopted"] != nil { report.filesSent += 1 }
                    break
                }
            } catch {
                if case .stopped = error { throw error }
                failure = failure ?? error
            }
        }
        if let failure { throw failure }
    }

    /// The client for a file's ranges: a minute and a half for 8 MiB (down to about
    /// 0.75 Mbit/s) instead of the 15 s of a page of changes.
    private func fileClient(_ client: HTTPClient) -> HTTPClient {
        var c = client
        c.timeout = 90
        return c
    }

    /// The files of meditations and sounds arriving here (those `sync files` lets this
    /// device fetch) come down from where the last cycle stopped; a file the hub has not got
    /// yet waits. A file that fails does not hold up the others.
    private func fetchFiles(_ service: SyncService, _ client: HTTPClient, _ auth: [(String, String)], _ report: inout Report,
                            stop: () -> Bool) throws(SyncError) {
        var failure: SyncError?
        for w in try SyncFiles.wanted(store: store, limit: try service.filePolicy().limit) {
            var offset = w.have
            do throws(SyncError) {
                // Whole already, but not adopted (a cut between the last bytes and the catalog).
                if offset >= w.size {
                    if case .adopted = try SyncFiles.append(w.hash, offset: offset, bytes: [], store: store) { report.filesFetched += 1 }
                    continue
                }
                while offset < w.size {
                    if stop() { throw .stopped }
                    let last = min(offset + Int64(SyncFiles.chunkBytes), w.size) - 1
                    let answer = try fileClient(client).send("GET", "/api/sync/file/\(w.hash)", headers: auth + [("Range", "bytes=\(offset)-\(last)")])
                    if answer.status == 404 { break }   // the hub waits for it too (or is older)
                    guard answer.status == 206 else { _ = try Self.answer(answer); break }
                    guard !answer.body.isEmpty, answer.body.count <= Int(last - offset + 1) else {
                        throw .refused(both("the hub sent other bytes than those asked for", "der Hub schickte andere Bytes als die erbetenen"))
                    }
                    let outcome = try SyncFiles.append(w.hash, offset: offset, bytes: answer.body, store: store)
                    report.fileBytes += Int64(answer.body.count)
                    switch outcome {
                    case .more(let next):
                        guard next > offset else { throw .refused(both("a file's transfer made no progress", "die Übertragung einer Datei kam nicht voran")) }
                        offset = next
                    case .adopted:
                        report.filesFetched += 1
                        offset = w.size
                    case .unwanted:
                        offset = w.size
                    }
                }
            } catch {
                if case .stopped = error { throw error }
                failure = failure ?? error
            }
        }
        if let failure { throw failure }
    }

    private static var otherHub: SyncError {
        .refused(both("the address answers as another hub than the one paired: pair again (`stillmoment sync pair`)",
                      "unter der Adresse antwortet ein anderer Hub als der gekoppelte: neu koppeln (`stillmoment sync pair`)"))
    }

    /// An answer's JSON, or the hub's error as ours.
    static func answer(_ a: HTTPClient.Answer) throws(SyncError) -> JSON {
        let json = try? JSONParser.parse(a.body)
        guard a.status == 200, let json else {
            let message = json?["error"]?["message"]?.string.map { String(Display.clean($0).prefix(300)) } ?? "HTTP \(a.status)"
            let code = json?["error"]?["code"]?.string
            if a.status >= 500 || a.status == 429 { throw .unreachable(both("the hub: \(message)", "der Hub: \(message)")) }
            if code == "unpaired" {
                throw .refused(both("the hub no longer knows this device (revoked?): pair again with `stillmoment sync pair`",
                                    "der Hub kennt dieses Gerät nicht mehr (widerrufen?): neu koppeln mit `stillmoment sync pair`"))
            }
            throw .refused(both("the hub refused: \(message)", "der Hub lehnte ab: \(message)"))
        }
        return json
    }
}
