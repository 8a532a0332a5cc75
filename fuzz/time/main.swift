// libFuzzer harness for the time parser (Sources/StillMomentCore/TimeText.swift, compiled with
// the few Core files it uses). Any text goes to TimeText.parse and TimeText.parseSigned: each
// must return a value in range or throw ParseError whose message is one line; it must never
// trap on an overflow or conversion, nor hang. What parses is formatted back (clock, compact).

@inline(never)
func consume<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    let text = String(decoding: bytes, as: UTF8.self)
    do {
        let ms = try TimeText.parse(text)
        precondition(ms >= 0, "parse(\(text.debugDescription)) = \(ms)")
        consume((TimeText.clock(ms), TimeText.compact(ms)))
    } catch {
        precondition(!error.description.contains("\n"), "a refusal of two lines: \(error.description.debugDescription)")
    }
    do {
        let signed = try TimeText.parseSigned(text)
        consume((signed.fromEnd, TimeText.clock(signed.ms), TimeText.compact(signed.ms)))
    } catch {
        precondition(!error.description.contains("\n"), "a refusal of two lines: \(error.description.debugDescription)")
    }
    return 0
}
