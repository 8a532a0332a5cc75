import FoundationEssentials
#if canImport(StillMomentCore)
import StillMomentCore      // (the fuzz harness compiles Language.swift and Display.swift in instead)
#endif

/// The control protocol: newline-delimited JSON over a Unix socket.
///
/// ```
/// → {"hello":{"version":3,"client":"stillmoment","language":"en"}}
/// ← {"hello":{"version":3,"daemon":"stillmoment","pid":4242,"home":"…"}}
/// → {"id":1,"command":"status"}
/// ← {"id":1,"result":{"state":"running",...}}
/// → {"id":2,"command":"seek","args":{"by":15000}}
/// ← {"id":2,"error":{"code":"no-session","message":"nothing is playing"}}
/// ← {"event":"progress","data":{...}}          (to clients that subscribed)
/// ```
/// A line may be at most 64 KiB; the first message must be the hello. The hello
/// negotiates: the client names the highest version it speaks, the daemon answers with the
/// highest it speaks too. Version 2 is version 1 with typed, strictly checked arguments (an
/// unknown key is refused with `bad-arguments` naming it); version 3 reads the message
/// itself as strictly (a hello takes version, client and language; a request id, command
/// and args; anything else is refused with `bad-request` naming it). The messages' shape is
/// in Messages.swift and Requests.swift.
public enum ControlProtocol {
    public static let version = 3
    public static let oldestVersion = 1
    public static let maxMessageBytes = 64 * 1024
}

/// Why a request or a connection was refused; stable for scripts.
public enum ErrorCode: String, Codable, Sendable, CaseIterable {
    case tooLong = "message-too-long"
    case malformed = "malformed-json"
    case notHello = "hello-expected"
    case badVersion = "unsupported-version"
    case badRequest = "bad-request"
    case unknownCommand = "unknown-command"
    case badArguments = "bad-arguments"
    // Refusals of a well-formed request or connection.
    case noSession = "no-session"
    case device = "device"
    case failed = "failed"
    case forbidden = "forbidden"
    case busy = "busy"
}

/// Why a message was refused; `code` is stable for scripts, the words are for people and
/// are put into a language only when the answer is written (the client's).
public struct ProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    public typealias Code = ErrorCode
    public let code: Code
    public let words: LocalizedText
    /// The request's id, when it could be read (so the answer can carry it).
    public let id: Int?
    /// What a program needs to act on it without reading the words (`bad-arguments`: the
    /// `key` refused and the keys the command `takes`).
    public let args: [String: JSON]

    public init(_ code: Code, _ words: LocalizedText, id: Int? = nil, args: [String: JSON] = [:]) {
        self.code = code
        self.words = words
        self.id = id
        self.args = args
    }

    /// The same error, answering the request `id`.
    public func answering(_ id: Int) -> ProtocolError { ProtocolError(code, words, id: id, args: args) }

    /// The message in this process's language (a client showing it to its user).
    public var message: String { words.text() }

    public var description: String { "\(code.rawValue): \(message)" }

    /// The error answer to send back, in the client's language.
    public func answer(_ language: Language) -> JSON {
        // The message in the client's language; from version 3 its words in both too (a
        // client that answers others, the web app, says them in each one's).
        var error: [String: JSON] = ["code": .string(code.rawValue), "message": .string(words.text(language)),
                                     "words": .object(["en": .string(words.en), "de": .string(words.de)])]
        if !args.isEmpty { error["args"] = .object(args) }
        var o: [String: JSON] = ["error": .object(error)]
        if let id { o["id"] = .number(Double(id)) }
        return .object(o)
    }
}

/// The commands a client may send.
public enum ControlCommand: String, Sendable, CaseIterable {
    case status, pause, resume, stop, seek, subscribe, unsubscribe, timer, play
    /// Ends a running timer now, with its end gong, as a completed sit.
    case finish
    /// The schedule changed: the daemon looks at it again.
    case reschedule
    /// Runs a scheduled entry now (`{"id": N}`).
    case ringNow = "ring-now"
    /// A bell here now, or in several rooms at one instant (`{"bell", "strikes", "volume", "rooms"}`).
    case ring
    /// The nodes the broker knows: their rooms, clocks and whether they are online.
    case rooms
}

/// A decoded message from a client.
public enum ClientMessage: Sendable, Equatable {
    case hello(version: Int, client: String, language: Language?)
    case request(id: Int, command: ControlCommand, args: [String: JSON])

    /// Decodes one line (without its newline). `helloDone` says whether the hello came;
    /// `version`, the version it agreed (from 3 on, a key the message does not take is refused).
    public static func decode(_ line: some Collection<UInt8>, helloDone: Bool, version: Int = ControlProtocol.version) throws(ProtocolError) -> ClientMessage {
        guard line.count <= ControlProtocol.maxMessageBytes else {
            throw ProtocolError(.tooLong, both("a message is limited to \(ControlProtocol.maxMessageBytes) bytes", "eine Nachricht hat höchstens \(ControlProtocol.maxMessageBytes) Bytes"))
        }
        let value: JSON
        do throws(JSONParseError) {
            // One linear pass, nesting at most 32 deep (a deep line once held the loop for 37 s).
            value = try JSONParser.parse(line)
        } catch {
            if error.reason.hasPrefix("nested deeper") { throw ProtocolError(.badRequest, both("a message may nest at most \(JSONParser.maxDepth) deep", "eine Nachricht darf höchstens \(JSONParser.maxDepth) Ebenen tief sein")) }
            throw ProtocolError(.malformed, both("not a JSON object on one line (\(error.description))", "kein JSON-Objekt auf einer Zeile (\(error.description))"))
        }
        guard case .object(let o) = value else { throw ProtocolError(.malformed, both("a message is a JSON object", "eine Nachricht ist ein JSON-Objekt")) }
        if let hello = o["hello"] {
            guard case .object(let h) = hello, let v = h["version"]?.number else {
                throw ProtocolError(.badRequest, both("hello needs a version", "das Hallo braucht eine Version"))
            }
            guard v.isFinite, v == v.rounded(), v >= Double(ControlProtocol.oldestVersion), v <= 1_000_000 else {
                throw ProtocolError(.badVersion, both("this daemon speaks versions \(ControlProtocol.oldestVersion) to \(ControlProtocol.version) of the protocol, not \(v)",
                                                    "dieser Daemon spricht die Protokollversionen \(ControlProtocol.oldestVersion) bis \(ControlProtocol.version), nicht \(v)"))
            }
            if v >= 3 {
                try only(["hello"], in: o, id: nil)
                try only(["version", "client", "language"], in: h, id: nil)
            }
            return .hello(version: Int(min(v, Double(ControlProtocol.version))), client: h["client"]?.string ?? "",
                          language: h["language"]?.string == "de" ? .de : h["language"]?.string == "en" ? .en : nil)
        }
        guard helloDone else { throw ProtocolError(.notHello, both("say hello first: {\"hello\":{\"version\":\(ControlProtocol.version)}}", "zuerst das Hallo: {\"hello\":{\"version\":\(ControlProtocol.version)}}")) }
        guard let idValue = o["id"]?.number, idValue == idValue.rounded(), abs(idValue) < 1e15 else {
            throw ProtocolError(.badRequest, both("a request needs an integer id", "eine Anfrage braucht eine ganzzahlige id"))
        }
        let id = Int(idValue)
        guard let name = o["command"]?.string else { throw ProtocolError(.badRequest, both("a request needs a command", "eine Anfrage braucht ein command"), id: id) }
        guard let command = ControlCommand(rawValue: name) else {
            let known = ControlCommand.allCases.map(\.rawValue).joined(separator: ", ")
            throw ProtocolError(.unknownCommand, both("unknown command '\(Display.clean(String(name.prefix(64))))'; the commands are: \(known)", "unbekannter Befehl '\(Display.clean(String(name.prefix(64))))'; die Befehle sind: \(known)"), id: id,
                                args: ["command": .string(Display.clean(String(name.prefix(64)))), "known": .array(ControlCommand.allCases.map { .string($0.rawValue) })])
        }
        if version >= 3 { try only(["id", "command", "args"], in: o, id: id) }
        var args: [String: JSON] = [:]
        switch o["args"] {
        case nil, .null?: break
        case .object(let a)?: args = a
        default: throw ProtocolError(.badArguments, both("args must be an object", "args muss ein Objekt sein"), id: id)
        }
        return .request(id: id, command: command, args: args)
    }

    /// Refuses a key of `object` that is not one of `keys`, naming it.
    private static func only(_ keys: Set<String>, in object: [String: JSON], id: Int?) throws(ProtocolError) {
        guard let extra = object.keys.filter({ !keys.contains($0) }).sorted().first else { return }
        let name = Display.clean(String(extra.prefix(40)))
        let known = keys.sorted().joined(separator: ", ")
        throw ProtocolError(.badRequest, both("unknown key '\(name)' in the message; it takes: \(known)",
                                            "unbekannter Schlüssel '\(name)' in der Nachricht; sie nimmt: \(known)"), id: id,
                            args: ["key": .string(name), "takes": .array(keys.sorted().map(JSON.string))])
    }
}

/// Splits a byte stream into lines, refusing any longer than the limit (without
/// buffering more than the limit for it).
public struct LineFramer: Sendable {
    private var buffer: [UInt8] = []
    private var discarding = false
    public let limit: Int

    public init(limit: Int = ControlProtocol.maxMessageBytes) { self.limit = limit }

    public enum Item: Equatable, Sendable {
        case line([UInt8])
        case tooLong
    }

    /// Adds bytes read from the socket; returns the complete items.
    public mutating func feed(_ bytes: some Collection<UInt8>) -> [Item] {
        var items: [Item] = []
        for b in bytes {
            if b == 0x0A {
                if discarding {
                    discarding = false
                } else {
                    if buffer.last == 0x0D { buffer.removeLast() }
                    items.append(.line(buffer))
                }
                buffer.removeAll(keepingCapacity: true)
                continue
            }
            if discarding { continue }
            buffer.append(b)
            if buffer.count > limit {
                items.append(.tooLong)
                buffer.removeAll()
                discarding = true
            }
        }
        return items
    }
}
