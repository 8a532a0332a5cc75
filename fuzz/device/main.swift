// libFuzzer harness for the device-name guard (Sources/StillMomentAudio/DeviceName.swift,
// compiled alone). Any text goes to the parser, with and without the tests' file switch.
// What it accepts must hold nothing ALSA reads as a definition, a file or a command: no
// quote, brace, pipe, `$`, `;`, backslash or space, no PCM named file, tee or shm (except the
// switch's own `file:FILE=/path,FORMAT=…`, whose path never starts with `|`), no KEY= but
// CARD, DEV and SUBDEV, no path but snapserver's pipe (`snapcast:/PATH`: absolute, no '.' or
// '..' part); what it refuses says so in one printable line.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    let text = String(decoding: bytes, as: UTF8.self)
    for switched in [false, true] {
        do {
            let name = try DeviceName(parsing: text, allowingTestFiles: switched)
            check(name, switched: switched)
        } catch {
            let line = error.description
            precondition(!line.contains("\n") && line.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F },
                         "a refusal that is not one printable line: \(line.debugDescription)")
        }
    }
    return 0
}

func check(_ name: DeviceName, switched: Bool) {
    let t = name.text
    precondition(!t.isEmpty && t.utf8.count <= DeviceName.maxLength, "length: \(t.debugDescription)")
    precondition(t.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F }, "not printable: \(t.debugDescription)")
    precondition(!t.contains(where: { "{}|\"'$;\\".contains($0) }), "an inline definition: \(t.debugDescription)")
    let inner = t.hasPrefix("alsa:") ? Substring(t.dropFirst(5)) : Substring(t)
    let pcm = inner.prefix { $0 != ":" }
    if name.form == .testFile {
        precondition(switched && pcm == "file" && inner.contains("FILE=/"), "a test capture without the switch: \(t.debugDescription)")
        return
    }
    precondition(!["file", "tee", "shm"].contains(pcm), "a file or command plugin: \(t.debugDescription)")
    if case .snapcast(let pipe) = name.form {
        // snapserver's pipe: never through ALSA, and its path absolute with no '.', '..' or
        // empty part, of safe bytes only.
        precondition(t.hasPrefix("snapcast") && !t.hasPrefix("alsa:"), "a pipe through ALSA: \(t.debugDescription)")
        if let pipe {
            let parts = pipe.split(separator: "/", omittingEmptySubsequences: false)
            precondition(pipe.hasPrefix("/") && parts.dropFirst().allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." }
                         && !pipe.contains("="), "a pipe's path: \(t.debugDescription)")
        }
        return
    }
    precondition(!t.contains("/"), "a path: \(t.debugDescription)")
    if case .pulse = name.form { return }
    for item in inner.drop { $0 != ":" }.dropFirst().split(separator: ",") where item.contains("=") {
        precondition(["CARD", "DEV", "SUBDEV"].contains(String(item.prefix { $0 != "=" })), "a key: \(t.debugDescription)")
    }
}
