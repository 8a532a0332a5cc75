// `stillmoment mqtt enable|disable|status`: the Home Assistant bridge's settings (`mqtt-*`),
// checked here with the daemon's own guards; the daemon follows them (MQTT/MQTTBridge.swift).
import ArgumentParser
import FoundationEssentials
import Glibc
import StillMomentControl
import StillMomentCore

struct MQTTCommandLine: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mqtt",
        abstract: "Home Assistant through MQTT discovery (off unless enabled).",
        discussion: """
            The daemon connects to the broker, announces this node as one Home Assistant device \
            (buttons, a preset select, minutes, sensors, an event entity, a schedule switch) and \
            stays running while MQTT is on. The password is read from a file that must be yours \
            and readable by you alone (chmod 600); it is never shown or logged.
            """,
        subcommands: [Enable.self, Disable.self, Status.self],
        defaultSubcommand: Status.self
    )

    struct Enable: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "enable", abstract: "Connect the daemon to a broker.")
        @Option(help: "The broker: HOST or HOST:PORT (port 1883, 8883 with --tls).") var broker: String
        @Option(help: "The user name at the broker.") var user: String?
        @Option(name: .customLong("password-file"), help: "A file holding the password (mode 0600, yours).") var passwordFile: String?
        @Option(name: .customLong("tls"), help: "Use TLS, trusting this CA certificate (PEM).") var tls: String?
        @Option(help: "The node's name in topics and ids (a–z, 0–9, _, -; default: the host name).") var node: String?

        func run() throws {
            do throws(CoreError) {
                let catalog = try SoundCatalog.withCustomSounds(store: try LibraryStore())
                let ca = try tls.map { p throws(CoreError) in try MQTTConfig.checkPath(absolute(p), option: "--tls") }
                let address = try MQTTBroker(parsing: broker, tls: ca != nil)
                if passwordFile != nil && user == nil {
                    throw CoreError.badRequest(both("--password-file needs --user", "--password-file braucht --user"))
                }
                let file = try passwordFile.map { p throws(CoreError) in try MQTTConfig.checkPath(absolute(p), option: "--password-file") }
                if let file { _ = try MQTTConfig.readPassword(file) }    // checked now; read again by the daemon
                if let ca, access(ca, R_OK) != 0 { throw CoreError.io(path: ca, reason: .systemError) }
                if let why = MQTTClient.unavailable() { throw CoreError.io(path: "libmosquitto.so.1", reason: .same(why)) }
                var written = Settings()
                try Settings.update { settings throws(CoreError) in
                    try settings.set("mqtt-broker", address.description, catalog: catalog)
                    try settings.set("mqtt-user", user ?? "", catalog: catalog)
                    try settings.set("mqtt-password-file", file ?? "", catalog: catalog)
                    try settings.set("mqtt-tls-ca", ca ?? "", catalog: catalog)
                    if let node { try settings.set("mqtt-node", node, catalog: catalog) }
                    try settings.set("mqtt-enabled", "on", catalog: catalog)
                    written = settings
                }
                let config = try MQTTConfig(written)
                Console.out(tr("MQTT on: the daemon connects to \(address) as node \(config.node)",
                               "MQTT an: der Daemon verbindet sich mit \(address) als Knoten \(config.node)"))
            } catch {
                throw Console.fail(error)
            }
            MQTTCommandLine.nudgeDaemon(start: true)
        }
    }

    struct Disable: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "disable", abstract: "Remove this node from Home Assistant and disconnect.")
        func run() throws {
            do {
                let catalog = try SoundCatalog.withCustomSounds(store: try LibraryStore())
                try Settings.update { settings throws(CoreError) in try settings.set("mqtt-enabled", "off", catalog: catalog) }
            } catch {
                throw Console.fail(error)
            }
            Console.out(tr("MQTT off: the daemon removes its entities from Home Assistant and disconnects",
                           "MQTT aus: der Daemon entfernt seine Entitäten aus Home Assistant und trennt die Verbindung"))
            MQTTCommandLine.nudgeDaemon(start: false)
        }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "status", abstract: "Show the MQTT settings (the default).")
        func run() throws {
            let config: MQTTConfig
            do { config = try MQTTConfig(try Settings.load()) } catch { throw Console.fail(error) }
            Console.out(config.enabled ? tr("MQTT: on", "MQTT: an") : tr("MQTT: off", "MQTT: aus"))
            Console.out(tr("broker: ", "Broker: ") + (config.broker?.description ?? "-"))
            Console.out(tr("node: ", "Knoten: ") + config.node)
            Console.out(tr("user: ", "Benutzer: ") + Display.clean(config.user ?? "-"))
            // The password's file is named, never its content.
            Console.out(tr("password file: ", "Passwortdatei: ") + Display.clean(config.passwordFile ?? "-"))
            Console.out("TLS: " + Display.clean(config.tlsCA ?? "-"))
            // The link as the running daemon has it (none is started to ask).
            let link: String
            if let status = try? ControlClient.connect(startIfNeeded: false).send(.status) {
                if let m = status.mqtt {
                    link = m.connected ? tr("connected to \(m.broker) as node \(m.node)", "verbunden mit \(m.broker) als Knoten \(m.node)")
                                       : tr("connecting to \(m.broker)", "verbindet sich mit \(m.broker)")
                } else {
                    link = tr("none", "keine")
                }
            } else {
                link = tr("none (no daemon runs)", "keine (kein Daemon läuft)")
            }
            Console.out(tr("link: ", "Verbindung: ") + link)
        }
    }

    /// The daemon looks at the settings when it wakes: a connection wakes it (`start`: one is
    /// started when none runs, since MQTT needs a running daemon).
    static func nudgeDaemon(start: Bool) {
        do {
            let client = try ControlClient.connect(startIfNeeded: start)
            _ = try client.send(.status)
        } catch {
            if start { Console.warning(tr("the daemon could not be started: \(error.description)", "der Daemon ließ sich nicht starten: \(error.description)")) }
        }
    }
}

/// A path made absolute against the working folder (the daemon runs elsewhere).
private func absolute(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    var buf = [CChar](repeating: 0, count: 4096)
    guard getcwd(&buf, buf.count) != nil else { return path }
    return MQTTConfig.text(buf) + "/" + path
}
