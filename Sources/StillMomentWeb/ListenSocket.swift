// The listening TCP socket of the web app: numeric address, SO_REUSEADDR, non-blocking.
import Glibc
import StillMomentCore

extension ListenAddress {
    /// A listening socket on this address.
    func bind() throws(WebError) -> Int32 {
        let v6 = host.contains(":")
        let fd = socket(v6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw WebError.io("socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var r: Int32
        if v6 {
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_port = in_port_t(UInt16(port).bigEndian)
            guard inet_pton(AF_INET6, host, &a.sin6_addr) == 1 else {
                close(fd)
                throw WebError.badAddress(tr("'\(host)' is not an IPv6 address", "'\(host)' ist keine IPv6-Adresse"))
            }
            r = Self.bind(fd, &a)
        } else {
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = in_port_t(UInt16(port).bigEndian)
            guard inet_pton(AF_INET, host, &a.sin_addr) == 1 else {
                close(fd)
                throw WebError.badAddress(tr("'\(host)' is not an IPv4 address", "'\(host)' ist keine IPv4-Adresse"))
            }
            r = Self.bind(fd, &a)
        }
        if r != 0 || listen(fd, 64) != 0 {
            let e = errno
            close(fd)
            throw WebError.io(tr("cannot listen on \(description): \(String(cString: strerror(e)))",
                                 "kann nicht auf \(description) lauschen: \(String(cString: strerror(e)))"))
        }
        return fd
    }

    /// bind(2) with an IPv4 or IPv6 address.
    private static func bind<Address>(_ fd: Int32, _ address: inout Address) -> Int32 {
        withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<Address>.size)) }
        }
    }

    static func boundPort(_ fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let r = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        guard r == 0 else { return 0 }
        let family = storage.ss_family
        return withUnsafePointer(to: &storage) { p -> Int in
            if family == sa_family_t(AF_INET6) {
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }
}
