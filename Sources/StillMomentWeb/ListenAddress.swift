/// Where the web app listens: `ADDR:PORT` (`127.0.0.1:8181`, `0.0.0.0:8181`,
/// `[::]:8181`, `192.168.1.20:80`). Numeric addresses only: no name is looked up.
import StillMomentCore

public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public static let standard = ListenAddress(host: "127.0.0.1", port: 8181)

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public init(_ text: String) throws(CoreError) {
        let t = text.trimmingWhitespace()
        let bad = CoreError.badValue(option: "--listen", reason: both(
            "'\(Display.clean(String(t.prefix(60))))' is not ADDRESS:PORT (e.g. 127.0.0.1:8181, 0.0.0.0:8181 or [::]:8181)",
            "'\(Display.clean(String(t.prefix(60))))' ist nicht ADRESSE:PORT (z. B. 127.0.0.1:8181, 0.0.0.0:8181 oder [::]:8181)"))
        var host: Substring, portText: Substring
        if t.hasPrefix("[") {
            guard let close = t.firstIndex(of: "]"), t[t.index(after: close)...].hasPrefix(":") else { throw bad }
            host = t[t.index(after: t.startIndex)..<close]
            portText = t[t.index(close, offsetBy: 2)...]
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { throw bad }
        } else {
            guard let colon = t.lastIndex(of: ":") else { throw bad }
            host = t[..<colon]
            portText = t[t.index(after: colon)...]
            let parts = host.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 4, parts.allSatisfy({ p in
                !p.isEmpty && p.count <= 3 && p.allSatisfy(\.isASCIIDigit) && (Int(p) ?? 256) <= 255
            }) else { throw bad }
        }
        guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isASCIIDigit),
              let port = Int(portText), port >= 0, port <= 65535 else { throw bad }
        self.host = String(host)
        self.port = port
    }

    /// Whether only this machine can reach it.
    public var isLoopback: Bool { host.hasPrefix("127.") || host == "::1" }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
