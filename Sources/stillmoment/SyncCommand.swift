// `stillmoment sync`: one library on several devices. `sync pair URL --pin PIN` pairs this
// device with a hub (any node running `stillmoment web` on the LAN; its `web pair` shows the
// PIN), `sync now` runs a cycle, `sync status` says where it stands, `sync off` forgets the
// hub. On the hub, `sync devices` and `sync forget ID` list and revoke paired devices.
import ArgumentParser
import FoundationEssentials
import Glibc
import StillMomentControl
import StillMomentCore
import StillMomentWeb

struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Sync meditations, presets and the practice log with the other devices (through a hub).",
        discussion: """
            One node is the hub: it runs `stillmoment web --listen ADDRESS:PORT`, and \
            `stillmoment web pair` on it shows a PIN. On each other device: \
            `stillmoment sync pair http://HUB:8181 --pin PIN`, then `stillmoment sync now`. \
            A conflict (the same field changed on two devices) goes to the later change by \
            a hybrid logical clock; a delete wins over older changes and loses to newer ones. \
            A meditation's row comes first and its file after it (`sync files` says which \
            files this device fetches).
            """,
        subcommands: [Pair.self, Now.self, Status.self, Files.self, Name.self, ResetClock.self, Off.self, Devices.self, Forget.self],
        defaultSubcommand: Status.self
    )

    static func fail(_ error: SyncError) -> ExitCode {
        switch error {
        case .refused: return Console.fail(error.description, code: 1)
        case .store(let e): return Console.fail(e)
        case .clockAhead, .unreachable, .busy, .stopped: return Console.fail(error.description, code: 1)
        }
    }

    struct Pair: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "pair", abstract: "Pair this device with a hub (its `web pair` shows the PIN).")
        @Argument(help: "The hub's address: http://HOST:PORT.") var url: String
        @Option(help: "The six-digit PIN the hub's `stillmoment web pair` shows.") var pin: String
        @Option(help: "This device's name on the hub (default: the host name).") var name: String?
        @Option(help: "With an https:// hub: the SHA-256 fingerprint its certificate must have (`openssl x509 -noout -fingerprint -sha256 -in CERT` on the hub); without it, the certificate shown now is pinned.")
        var fingerprint: String?

        func run() throws {
            let store = try openStore()
            let label = name ?? Self.hostName()
            do throws(SyncError) {
                let hub = try SyncPeer(store: store).pair(url: url, pin: pin, name: label, fingerprint: fingerprint)
                Console.out(tr("paired with the hub at \(hub.url) (as '\(Display.clean(label))'); `stillmoment sync now` runs a cycle",
                               "mit dem Hub unter \(hub.url) gekoppelt (als '\(Display.clean(label))'); `stillmoment sync now` gleicht ab"))
                if let fp = hub.fingerprint {
                    Console.out(tr("the hub's certificate is pinned: SHA-256 \(fp)", "das Zertifikat des Hubs ist festgehalten: SHA-256 \(fp)"))
                }
            } catch {
                throw SyncCommand.fail(error)
            }
        }

        static func hostName() -> String {
            var buffer = [CChar](repeating: 0, count: 256)
            guard gethostname(&buffer, buffer.count - 1) == 0 else { return "device" }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    struct Now: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "now", abstract: "Run a sync cycle with the hub now.")
        @Flag(help: "Print JSON.") var json = false
        func run() throws {
            let store = try openStore()
            do throws(SyncError) {
                let report: SyncPeer.Report
                do {
                    report = try SyncPeer(store: store).cycle()
                } catch {
                    // Pages may have been applied before it failed: a running daemon reads its schedule again.
                    if case .refused = error { ScheduleCommand.notifyDaemon(start: false) }
                    if case .unreachable = error { ScheduleCommand.notifyDaemon(start: false) }
                    throw error
                }
                // A running daemon reads the schedule again (entries from other devices ring).
                if report.changed > 0 { ScheduleCommand.notifyDaemon(start: false) }
                if json { Console.out(jsonText(report)); return }
                Console.out(tr("synced with \(report.hub): \(report.uploaded) change(s) sent, \(report.downloaded) received, \(report.changed) applied here",
                               "abgeglichen mit \(report.hub): \(report.uploaded) Änderung(en) gesendet, \(report.downloaded) empfangen, \(report.changed) hier übernommen"))
                if report.filesSent + report.filesFetched > 0 || report.fileBytes > 0 {
                    let mb = Files.megabytes(report.fileBytes)
                    Console.out(tr("files: \(report.filesSent) sent, \(report.filesFetched) fetched (\(mb) moved)",
                                   "Dateien: \(report.filesSent) gesendet, \(report.filesFetched) geholt (\(mb) übertragen)"))
                }
            } catch {
                throw SyncCommand.fail(error)
            }
        }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "status", abstract: "Where sync stands: the hub, what waits, the last cycle.")
        @Flag(help: "Print JSON.") var json = false
        func run() throws {
            let store = try openStore()
            do throws(SyncError) {
                let s = try SyncService(store: store).status()
                if json { Console.out(jsonText(s)); return }
                Console.out(tr("node      ", "Knoten    ") + s.node + " (" + (try SyncService(store: store).deviceName()) + ")")
                Console.out(tr("hub       ", "Hub       ") + (s.hub ?? tr("none (this node can be one: `stillmoment web`)", "keiner (dieser Knoten kann einer sein: `stillmoment web`)")))
                Console.out(tr("records   ", "Sätze     ") + String(s.records))
                Console.out(tr("waiting   ", "wartend   ") + String(s.pending))
                if let t = s.lastCycle {
                    Console.out(tr("last sync ", "zuletzt   ") + PracticeText.when(LocalTime.at(unix: Int64(t))))
                }
                if let offset = s.hubOffset, abs(offset) >= 2000 {
                    let seconds = abs(offset) / 1000
                    Console.out(tr("clock     ", "Uhr       ") + (offset > 0 ? tr("\(seconds) s behind the hub's", "\(seconds) s hinter der des Hubs")
                                                                           : tr("\(seconds) s ahead of the hub's", "\(seconds) s vor der des Hubs")))
                }
                let arriving = try SyncService(store: store).arriving()
                if !arriving.isEmpty {
                    let fetched = arriving.filter(\.fetched)
                    let left = fetched.reduce(Int64(0)) { $0 + max(0, $1.size - $1.have) }
                    Console.out(tr("arriving  ", "unterwegs ") + tr("\(fetched.count) file(s), \(Files.megabytes(left)) to fetch", "\(fetched.count) Datei(en), \(Files.megabytes(left)) zu holen")
                                + (fetched.count < arriving.count ? tr("; \(arriving.count - fetched.count) kept on the hub only", "; \(arriving.count - fetched.count) nur auf dem Hub") : ""))
                }
                if let e = s.lastError { Console.out(tr("error     ", "Fehler    ") + e) }
            } catch {
                throw SyncCommand.fail(error)
            }
        }
    }

    struct Files: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "files",
            abstract: "Which meditations' files this device fetches: all, none, or under SIZE (e.g. under 200M); without one, what is arriving.",
            discussion: """
                A meditation synced from another device is listed at once; its file follows. \
                `none` keeps only the rows here (the files stay on the hub and their own \
                devices), `under 200M` fetches files up to that size. A file here is never \
                deleted because of this setting.
                """)
        @Argument(help: "all, none, or under.") var policy: String?
        @Argument(help: "The largest file to fetch (with under): 200M, 1G.") var size: String?
        @Flag(help: "Print JSON.") var json = false

        static func megabytes(_ bytes: Int64) -> String {
            bytes >= 10_000_000 ? "\(bytes / 1_000_000) MB" : String(format: "%.1f MB", Double(bytes) / 1_000_000)
        }

        func run() throws {
            let store = try openStore()
            let service = SyncService(store: store)
            var chosen: SyncService.FilePolicy?
            if let policy {
                switch (policy.lowercased(), size) {
                case ("all", nil): chosen = .all
                case ("none", nil): chosen = SyncService.FilePolicy.none
                case ("under", let text?): chosen = .under(try ByteSize.parse(text, option: "size"))
                default:
                    throw CoreError.badValue(option: "files", reason: both("say all, none, or under SIZE (e.g. under 200M)",
                                                                          "sage all, none oder under GRÖSSE (z. B. under 200M)"))
                }
            }
            do throws(SyncError) {
                if let chosen { try service.setFilePolicy(chosen) }
                let current = try service.filePolicy()
                let arriving = try service.arriving()
                if json {
                    Console.out(JSON.object(["files": .string(current.limit.map { $0 == 0 ? "none" : "under \($0)" } ?? "all"),
                                             "arriving": JSON(encoding: arriving)]).line)
                    return
                }
                switch current {
                case .all: Console.out(tr("this device fetches every meditation's file", "dieses Gerät holt die Datei jeder Meditation"))
                case .none: Console.out(tr("this device fetches no meditation's file (rows only)", "dieses Gerät holt keine Datei einer Meditation (nur die Einträge)"))
                case .under(let n): Console.out(tr("this device fetches files up to \(Self.megabytes(n))", "dieses Gerät holt Dateien bis \(Self.megabytes(n))"))
                }
                for a in arriving {
                    let state = a.fetched ? tr("arriving, \(Self.megabytes(a.have)) of \(Self.megabytes(a.size))", "unterwegs, \(Self.megabytes(a.have)) von \(Self.megabytes(a.size))")
                                          : tr("on the hub only (\(Self.megabytes(a.size)))", "nur auf dem Hub (\(Self.megabytes(a.size)))")
                    Console.out("\(a.id.prefix(8))  \(Display.clean(a.name))  \(state)")
                }
            } catch {
                throw SyncCommand.fail(error)
            }
        }
    }

    struct Name: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "name", abstract: "This node's name among its sync devices (schedule entries' --devices name it); with NAME, sets it.")
        @Argument(help: "The new name (1 to 64 characters).") var name: String?
        func run() throws {
            let store = try openStore()
            let service = SyncService(store: store)
            do throws(SyncError) {
                if let name {
                    try service.setDeviceName(name)
                    ScheduleCommand.notifyDaemon(start: false)
                }
                Console.out(try service.deviceName())
            } catch {
                throw SyncCommand.fail(error)
            }
        }
    }

    struct ResetClock: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reset-clock",
            abstract: "After this machine's clock once ran far ahead: set the sync clock back to now (what waits is stamped again).")
        func run() throws {
            let store = try openStore()
            do throws(SyncError) {
                let n = try SyncService(store: store).resetClock()
                Console.out(tr("the sync clock now starts from this machine's time; \(n) waiting change(s) stamped again",
                               "die Sync-Uhr geht jetzt von der Zeit dieses Rechners aus; \(n) wartende Änderung(en) neu gestempelt"))
            } catch {
                throw SyncCommand.fail(error)
            }
        }
    }

    struct Off: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "off", abstract: "Forget the hub (nothing here is deleted).")
        func run() throws {
            let store = try openStore()
            do throws(SyncError) {
                try SyncService(store: store).setHub(nil)
                Console.out(tr("this device no longer syncs (its library stays as it is)", "dieses Gerät gleicht nicht mehr ab (seine Bibliothek bleibt, wie sie ist)"))
            } catch {
                throw SyncCommand.fail(error)
            }
        }
    }

    struct Devices: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "devices", abstract: "On the hub: the paired devices and browsers (id, name, last seen).")
        @Flag(help: "Print JSON.") var json = false
        func run() throws {
            var inner = WebCommand.Devices()
            inner.json = json
            try inner.run()
        }
    }

    struct Forget: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "forget", abstract: "On the hub: revoke a paired device (its id from `sync devices`).")
        @Argument(help: "The device's id.") var id: String
        func run() throws {
            var inner = WebCommand.Revoke()
            inner.id = id
            try inner.run()
        }
    }
}
