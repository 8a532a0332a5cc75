// Shared by the aac and mpeg harnesses (compiled into both by fuzz/run.sh): one memfd (an
// anonymous in-memory regular file) for the whole run, rewritten with each input and
// reached through /proc/self/fd/N, so the real AudioFile reads it with pread: no disk I/O,
// nothing left behind.
import Glibc

private typealias MemfdCreate = @convention(c) (UnsafePointer<CChar>, UInt32) -> Int32

let memfd: Int32 = {
    // memfd_create is not exported by the Glibc Swift module; look it up at run time.
    guard let sym = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "memfd_create") else {
        fatalError("memfd_create not available")
    }
    let fd = unsafeBitCast(sym, to: MemfdCreate.self)("stillmoment-fuzz", 1 /* MFD_CLOEXEC */)
    guard fd >= 0 else { fatalError("memfd_create failed: errno \(errno)") }
    return fd
}()
let memfdPath = "/proc/self/fd/\(memfd)"

/// The memfd's content becomes the input.
func store(_ data: UnsafePointer<UInt8>?, _ size: Int) {
    guard ftruncate(memfd, 0) == 0 else { fatalError("ftruncate failed: errno \(errno)") }
    var done = 0
    while done < size, let data {
        let n = pwrite(memfd, data + done, size - done, off_t(done))
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { fatalError("pwrite failed: errno \(errno)") }
        done += n
    }
}
