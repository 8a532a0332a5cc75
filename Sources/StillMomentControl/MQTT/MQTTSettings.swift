// The MQTT bridge's settings (`mqtt-*` in settings.json, registered at start-up like the web
// app's) and the one guard every string from them passes before it reaches libmosquitto:
// the broker's address, the node's name, and the paths of the password file and the CA.
import FoundationEssentials
import Glibc
import StillMomentCore

/// Where the broker listens: a host name, an IPv4 address or a bracketed IPv6 one, and a port.
public struct MQTTBroker: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: Int

    /// "HOST", "HOST:PORT", "[V6]" or "[V6]:PORT"; the port defaults to 1883 (8883 with TLS).
    /// Anything else (spaces, control characters, a URL, an option) is refused in one line.
    public init(parsing text: String, tls: Bool = false) throws(CoreError) {
        let bad = CoreError.badValue(option: "--broker", reason: both(
            "'\(Display.clean(String(text.prefix(80))))' is no broker address; give HOST or HOST:PORT (e.g. 192.168.1.5:1883)",
            "'\(Display.clean(String(text.prefix(80))))' ist keine Broker-Adresse; gib HOST oder HOST:PORT an (z. B. 192.168.1.5:1883)"))
        var rest = Substring(text)
        var host: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw bad }
            host = rest[rest.index(after: rest.startIndex)..<close]
            rest = rest[rest.index(after: close)...]
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { throw bad }
        } else {
            let colon = rest.firstIndex(of: ":") ?? rest.endIndex
            host = rest[..<colon]
            rest = rest[colon...]
            let allowed = host.allSatisfy { ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "." || $0 == "-" || $0 == "_" }
            guard !host.isEmpty, allowed, !host.hasPrefix("-"), !host.hasPrefix("."), host.utf8.count <= 253 else { throw bad }
        }
        var port = tls ? 8883 : 1883
        if !rest.isEmpty {
            guard rest.hasPrefix(":"), rest.count <= 6, let p = Int(rest.dropFirst()), (1...65535).contains(p) else { throw bad }
            port = p
        }
        self.host = String(host)
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// The MQTT settings in force, each checked: what the daemon connects with.
public struct MQTTConfig: Sendable, Equatable {
    public var enabled: Bool
    public var broker: MQTTBroker?
    public var user: String?
    public var passwordFile: String?
    public var tlsCA: String?
    /// The node's name in topics and unique ids: [a-z0-9_-], from the host name by default.
    public var node: String

    public static let keys = ["mqtt-enabled", "mqtt-broker", "mqtt-user", "mqtt-password-file", "mqtt-tls-ca", "mqtt-node",
                              "mqtt-preset", "mqtt-minutes"]

    /// `mqtt-minutes` as a number (1…600), nil when it is not one.
    public static func minutes(_ text: String) -> Int? {
        guard text.count <= 3, text.allSatisfy(\.isASCII), let m = Int(text), (1...600).contains(m) else { return nil }
        return m
    }

    /// Registers the `mqtt-*` settings (harmless twice): call at start-up, before settings are read.
    public static func register() {
        Settings.register(Settings.Registered("mqtt-enabled", default: "off") { value throws(CoreError) in
            guard value == "on" || value == "off" else {
                throw CoreError.badValue(option: "mqtt-enabled", reason: both("must be on or off", "muss on oder off sein"))
            }
        })
        Settings.register(Settings.Registered("mqtt-broker", default: "") { value throws(CoreError) in
            if !value.isEmpty { _ = try MQTTBroker(parsing: value) }
        })
        Settings.register(Settings.Registered("mqtt-user", default: "") { value throws(CoreError) in
            _ = try checkUser(value)
        })
        Settings.register(Settings.Registered("mqtt-password-file", default: "") { value throws(CoreError) in
            if !value.isEmpty { _ = try checkPath(value, option: "mqtt-password-file") }
        })
        Settings.register(Settings.Registered("mqtt-tls-ca", default: "") { value throws(CoreError) in
            if !value.isEmpty { _ = try checkPath(value, option: "mqtt-tls-ca") }
        })
        Settings.register(Settings.Registered("mqtt-node", default: "") { value throws(CoreError) in
            if !value.isEmpty { _ = try checkNode(value) }
        })
        // What Home Assistant chose (its preset select and minutes number), kept across
        // restarts: the daemon writes them; empty is "Settings" and the `duration` setting.
        Settings.register(Settings.Registered("mqtt-preset", default: "") { value throws(CoreError) in
            guard value.utf8.count <= 200, !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
                throw CoreError.badValue(option: "mqtt-preset", reason: both("a preset's name: at most 200 bytes, no control characters",
                                                                           "der Name einer Vorgabe: höchstens 200 Bytes, keine Steuerzeichen"))
            }
        })
        Settings.register(Settings.Registered("mqtt-minutes", default: "") { value throws(CoreError) in
            guard value.isEmpty || minutes(value) != nil else {
                throw CoreError.badValue(option: "mqtt-minutes", reason: both("whole minutes from 1 to 600, or empty (the duration setting)",
                                                                            "ganze Minuten von 1 bis 600, oder leer (die Einstellung duration)"))
            }
        })
    }

    /// Reads and checks the settings (a value that fails its check is refused in one line).
    public init(_ settings: Settings) throws(CoreError) {
        enabled = settings.value("mqtt-enabled") == "on"
        let ca = try Self.optional(settings.value("mqtt-tls-ca")).map { p throws(CoreError) in try Self.checkPath(p, option: "mqtt-tls-ca") }
        tlsCA = ca
        broker = try Self.optional(settings.value("mqtt-broker")).map { b throws(CoreError) in try MQTTBroker(parsing: b, tls: ca != nil) }
        user = Self.optional(try Self.checkUser(settings.value("mqtt-user")))
        passwordFile = try Self.optional(settings.value("mqtt-password-file")).map { p throws(CoreError) in try Self.checkPath(p, option: "mqtt-password-file") }
        let named = settings.value("mqtt-node")
        node = named.isEmpty ? Self.hostNode() : try Self.checkNode(named)
    }

    private static func optional(_ s: String) -> String? { s.isEmpty ? nil : s }

    /// A user name: printable, at most 128 bytes.
    static func checkUser(_ value: String) throws(CoreError) -> String {
        guard value.utf8.count <= 128, !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw CoreError.badValue(option: "mqtt-user", reason: both("must be at most 128 printable bytes", "darf höchstens 128 druckbare Bytes lang sein"))
        }
        return value
    }

    /// A path handed to libmosquitto or opened here: absolute, no control characters, < 4096 bytes.
    public static func checkPath(_ value: String, option: String) throws(CoreError) -> String {
        guard value.hasPrefix("/"), value.utf8.count < 4096,
              !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw CoreError.badValue(option: option, reason: both("give an absolute path (/home/…) without control characters",
                                                                  "gib einen absoluten Pfad (/home/…) ohne Steuerzeichen an"))
        }
        return value
    }

    /// A node name: 1–64 of [a-z0-9_-] (it becomes part of topics and unique ids).
    public static func checkNode(_ value: String) throws(CoreError) -> String {
        guard (1...64).contains(value.count), value.allSatisfy({ ($0.isASCII && ($0.isLowercase || $0.isNumber)) || $0 == "_" || $0 == "-" }) else {
            throw CoreError.badValue(option: "mqtt-node", reason: both("must be 1–64 of a–z, 0–9, _ and -", "muss aus 1–64 Zeichen a–z, 0–9, _ und - bestehen"))
        }
        return value
    }

    /// The host name as a node name (lower case; anything else becomes _).
    static func hostNode() -> String {
        var buf = [CChar](repeating: 0, count: 256)
        let name = gethostname(&buf, buf.count - 1) == 0 ? text(buf) : ""
        return MQTTTopics.sanitise(name.isEmpty ? "stillmoment" : name)
    }

    /// A NUL-terminated C buffer as text.
    public static func text(_ buf: [CChar]) -> String {
        String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The password: read from its file, which must be a regular file of the user's own
    /// with no access for group or others (0600 or 0400), at most 1 KiB; one trailing newline dropped.
    public static func readPassword(_ path: String) throws(CoreError) -> String {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw CoreError.io(path: path, reason: .systemError) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            throw CoreError.badValue(option: "--password-file", reason: both("\(path) is not a regular file", "\(path) ist keine gewöhnliche Datei"))
        }
        guard st.st_uid == geteuid(), st.st_mode & 0o077 == 0 else {
            throw CoreError.badValue(option: "--password-file", reason: both(
                "\(path) must be yours and readable by you alone (chmod 600 \(path))",
                "\(path) muss dir gehören und nur für dich lesbar sein (chmod 600 \(path))"))
        }
        guard st.st_size <= 1024 else {
            throw CoreError.badValue(option: "--password-file", reason: both("\(path) is over 1 KiB: no password", "\(path) ist über 1 KiB groß: kein Passwort"))
        }
        var bytes = [UInt8](repeating: 0, count: 1025)
        let n = read(fd, &bytes, bytes.count)
        guard n >= 0 else { throw CoreError.io(path: path, reason: .systemError) }
        var text = Array(bytes[0..<n])
        if text.last == 0x0a { text.removeLast() }
        if text.last == 0x0d { text.removeLast() }
        guard !text.contains(0) else {
            throw CoreError.badValue(option: "--password-file", reason: both("\(path) holds a NUL byte", "\(path) enthält ein NUL-Byte"))
        }
        return String(decoding: text, as: UTF8.self)
    }
}
