import Glibc

/// Standard output in 64-KiB writes, for commands that stream many lines (`history
/// --json | --csv` of a long log): constant memory, few system calls.
struct OutputBuffer: ~Copyable {
    private var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(1 << 16) }

    mutating func add(_ text: String) {
        bytes.append(contentsOf: text.utf8)
        if bytes.count >= 1 << 16 { flush() }
    }

    mutating func flush() {
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }     // a closed pipe: the reader is gone
            done += n
        }
        bytes.removeAll(keepingCapacity: true)
    }
}
