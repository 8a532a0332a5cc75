// `stillmoment web`: the web app for a phone (a process of its own beside the daemon), and
// its pairing: `web pair` shows a PIN, `web devices` lists the paired browsers, `web revoke`
// ends one.
import ArgumentParser
import FoundationEssentials
import Glibc
import Logging
import StillMomentControl
import StillMomentCore
import StillMomentWeb

struct WebCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "web",
        abstract: "Serve the web app for a phone (off unless started; pair a browser with `web pair`).",
        discussion: """
            Listens on 127.0.0.1:8181 unless --listen or the setting web-listen says otherwise; \
            give a LAN address (e.g. 0.0.0.0:8181) to reach it from a phone. Plain HTTP: anyone \
            on the network can read the traffic, the token cookie included; --tls CERT KEY \
            serves HTTPS instead (OpenSSL 3, loaded only then). Runs in the foreground \
            (systemd: stillmoment-web.service).
            """,
        subcommands: [Serve.self, Pair.self, Devices.self, Revoke.self, ImportUpload.self],
        defaultSubcommand: Serve.self
    )

    struct Serve: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "serve", abstract: "Serve the web app (the default).")
        @Option(help: "ADDRESS:PORT to listen on (default: the setting web-listen, 127.0.0.1:8181).") var listen: String?
        @Option(name: .customLong("max-upload"), help: "The largest file a phone may upload (e.g. 500M, 2G; default: the setting web-max-upload, 1G).")
        var maxUpload: String?
        @Option(name: .customLong("tls"), parsing: .upToNextOption, help: ArgumentHelp("Serve HTTPS with this PEM certificate (chain) and key: --tls CERT KEY.", valueName: "CERT KEY"))
        var tls: [String] = []
        /// Seconds a connection has to send its request's head (tests shorten it).
        @Option(name: .customLong("head-timeout"), help: .hidden) var headTimeout: Double?

        func run() throws {
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = .info
                return handler
            }
            let log = Logger(label: "stillmoment.web")
            guard tls.isEmpty || tls.count == 2 else {
                throw Console.fail(tr("--tls takes two files: the certificate and its key (--tls cert.pem key.pem)",
                                      "--tls nimmt zwei Dateien: das Zertifikat und seinen Schlüssel (--tls cert.pem key.pem)"), code: 2)
            }
            do {
                let settings = try Settings.load()
                let address = try ListenAddress(listen ?? settings.value("web-listen"))
                let limit = try ByteSize.parse(maxUpload ?? settings.value("web-max-upload"), option: "--max-upload")
                let store = try LibraryStore()
                Upload.cleanFolder(home: store.home)
                let api = WebAPI(store: store, secure: !tls.isEmpty, log: log)
                let server: WebServer
                do {
                    var options = WebServer.Options(listen: address, maxUpload: limit)
                    if let headTimeout, headTimeout > 0, headTimeout <= 600 { options.headTimeout = headTimeout }
                    server = try WebServer(options: options, api: api, log: log, tls: tls.count == 2 ? (tls[0], tls[1]) : nil)
                } catch {
                    throw Console.fail(error.description)
                }
                let shown = ListenAddress(host: address.host, port: server.port)
                log.info("serving the web app on \(tls.isEmpty ? "http" : "https")://\(shown) (uploads up to \(limit >> 20) MB)")
                if !address.isLoopback { log.notice("listening on the network: pair a browser with `stillmoment web pair`") }
                server.run()
            } catch let error as CoreError {
                throw Console.fail(error)
            }
        }
    }

    struct Pair: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "pair", abstract: "Show a PIN to pair a browser with (valid for 5 minutes, used once).")
        func run() throws {
            do {
                let store = try openStore()
                let (pin, expires) = try PairingStore(store: store).newPIN(now: Date().timeIntervalSince1970)
                let until = PracticeText.when(LocalTime.at(unix: Int64(expires)))
                Console.out(tr("pairing PIN \(pin), valid until \(until) (5 minutes, once): enter it in the web app",
                               "Kopplungs-PIN \(pin), gültig bis \(until) (5 Minuten, einmal): in der Web-App eingeben"))
                // The journal (or syslog) gets it too, for a Pi without a screen.
                if let line = strdup("pairing PIN \(pin), valid until \(until)") {
                    openlog("stillmoment-web", LOG_PID, LOG_USER)
                    withVaList([line]) { vsyslog(LOG_NOTICE, "%s", $0) }
                    closelog()
                    free(line)
                }
            } catch let error as CoreError {
                throw Console.fail(error)
            }
        }
    }

    struct Devices: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "devices", abstract: "List the paired browsers and sync devices (id, kind, name, last seen).")
        @Flag(help: "Print JSON.") var json = false
        func run() throws {
            do {
                let devices = try PairingStore(store: try openStore()).devices()
                if json {
                    Console.out(jsonText(devices))
                    return
                }
                if devices.isEmpty { Console.out(tr("no browser is paired (pair one with `stillmoment web pair`)", "kein Browser ist gekoppelt (einen koppeln mit `stillmoment web pair`)")) }
                for d in devices {
                    let seen = LocalTime.at(unix: Int64(d.lastSeen))
                    let kind = d.scope == .sync ? tr("sync    ", "Abgleich") : tr("browser ", "Browser ")
                    Console.out("\(String(d.id).padded(to: 4)) \(kind) \(Display.clean(d.name).padded(to: 30)) \(tr("last seen", "zuletzt")) \(PracticeText.when(seen))")
                }
            } catch let error as CoreError {
                throw Console.fail(error)
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "revoke", abstract: "End a browser's pairing (its id from `web devices`).")
        @Argument(help: "The device's id.") var id: String
        func run() throws {
            guard let n = Int64(id), n > 0 else {
                throw Console.fail(tr("'\(Display.clean(String(id.prefix(40))))' is not a device id (see `stillmoment web devices`)",
                                      "'\(Display.clean(String(id.prefix(40))))' ist keine Gerätenummer (siehe `stillmoment web devices`)"), code: 2)
            }
            do {
                guard try PairingStore(store: try openStore()).revoke(n) else {
                    throw Console.fail(tr("no paired device \(n) (see `stillmoment web devices`)", "kein gekoppeltes Gerät \(n) (siehe `stillmoment web devices`)"), code: 2)
                }
                Console.out(tr("device \(n) is no longer paired", "Gerät \(n) ist nicht mehr gekoppelt"))
            } catch let error as CoreError {
                throw Console.fail(error)
            }
        }
    }

    /// The web app's import of an upload, in a process of its own (see ImportChild):
    /// `web import-upload -- PATH NAME`, both after `--`, so a browser's file name such as
    /// `-x.mp3` or `--help` is never read as an option.
    struct ImportUpload: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "import-upload", shouldDisplay: false)
        @Argument var path: String
        @Argument var name: String
        func run() throws {
            do {
                let r = WebAPI.importFile(store: try openStore(), path: path, name: name)
                Console.out("\(r.status)\n" + String(decoding: r.body, as: UTF8.self))
            } catch let error as CoreError {
                Console.out("500\n" + "{\"error\":{\"code\":\"failed\",\"message\":" + JSON.string(error.description).line + "}}")
            }
        }
    }
}
