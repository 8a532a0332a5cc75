// libFuzzer target: the control protocol's framing and message decoder (what a daemon
// reads from any local client). Arbitrary bytes go through LineFramer, and every line is
// decoded both before and after the hello; nothing may crash, hang or grow without bound.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    var framer = LineFramer(limit: 4096)
    // Feed in two pieces so that a line split across reads is exercised too.
    let cut = size / 3
    var items = framer.feed(bytes[0..<cut])
    items += framer.feed(bytes[cut...])
    for item in items {
        guard case .line(let line) = item else { continue }
        for hello in [false, true] {
            do {
                let message = try ClientMessage.decode(line, helloDone: hello)
                if case .request(_, _, let args) = message { _ = JSON.object(args).line }
            } catch {
                _ = error.answer.line
            }
        }
    }
    return 0
}
