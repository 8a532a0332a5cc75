// A connection's client address as the pairing lockout counts it: an IPv4 address as is
// (also when it comes IPv4-mapped over an IPv6 socket), an IPv6 address by its /64 (one
// host may hold a whole /64, so counting single addresses would let it dodge its lock).
import Glibc

enum PeerAddress {
    /// The client address of an accepted socket's peer, "?" when the kernel cannot say.
    static func of(_ storage: sockaddr_storage) -> String {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            let a = withUnsafeBytes(of: &storage) { raw in raw.load(as: sockaddr_in.self) }
            return withUnsafeBytes(of: a.sin_addr) { ipv4(Array($0)) }
        case AF_INET6:
            let a = withUnsafeBytes(of: &storage) { raw in raw.load(as: sockaddr_in6.self) }
            let b = withUnsafeBytes(of: a.sin6_addr) { Array($0) }
            guard b.count == 16 else { return "?" }
            if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF { return ipv4(Array(b[12..<16])) }
            if b[0..<15].allSatisfy({ $0 == 0 }) && b[15] == 1 { return "::1" }
            let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(b[$0]) << 8 | UInt16(b[$0 + 1]), radix: 16) }
            return groups.joined(separator: ":") + "::/64"
        default:
            return "?"
        }
    }

    private static func ipv4(_ b: [UInt8]) -> String { b.map { String($0) }.joined(separator: ".") }
}
