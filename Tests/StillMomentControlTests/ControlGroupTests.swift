/// The system service's control group (STILLMOMENT_CONTROL_GROUP): who the daemon serves
/// besides its own user, and when a client trusts /run/stillmoment. The whole path (a
/// member served, a non-member refused by the folder, a gid-only outsider refused by the
/// daemon) runs as real users in `make test-deb`.
import Glibc
import Testing
@testable import StillMomentControl

@Suite("The system service's control group")
struct ControlGroupTests {
    static func st(mode: mode_t, uid: uid_t, kind: mode_t = S_IFDIR) -> stat {
        var s = stat()
        s.st_mode = kind | mode
        s.st_uid = uid
        return s
    }

    @Test("the daemon serves its own uid always, others only through the control group")
    func peers() {
        #expect(ControlPaths.mayControl(uid: geteuid(), gid: 12345, group: nil))
        #expect(!ControlPaths.mayControl(uid: 65534, gid: 65534, group: nil))
        // A peer whose gid (as it connected) is the group's: the kernel let it take that gid.
        #expect(ControlPaths.mayControl(uid: 65534, gid: 4242, group: 4242))
        // nobody (primary group nogroup) is no member of root's group, whose member list is empty.
        if geteuid() != 65534, let root = getgrgid(0), root.pointee.gr_mem.pointee == nil {
            #expect(!ControlPaths.mayControl(uid: 65534, gid: 65534, group: 0))
        }
    }

    @Test("/run/stillmoment is trusted when its owner's alone to write, with the owner's socket")
    func systemFolder() {
        let service: uid_t = 100
        let folder = ControlPaths.systemFolder
        #expect(ControlPaths.distrust(folder: folder, Self.st(mode: 0o750, uid: service), socket: Self.st(mode: 0o660, uid: service, kind: S_IFSOCK),
                                      me: 1000, german: false) == nil)
        #expect(ControlPaths.distrust(folder: folder, Self.st(mode: 0o750, uid: service), socket: nil, me: 1000, german: false) == nil)
        let open = ControlPaths.distrust(folder: folder, Self.st(mode: 0o770, uid: service), socket: nil, me: 1000, german: false)
        #expect(open?.description.contains("is writable by others (mode 770)") == true)
        let foreign = ControlPaths.distrust(folder: folder, Self.st(mode: 0o750, uid: service),
                                            socket: Self.st(mode: 0o660, uid: 1001, kind: S_IFSOCK), me: 1000, german: false)
        #expect(foreign?.description.contains("holds a control.sock that is not its owner's") == true)
        // Another folder keeps today's rule: ours and private.
        #expect(ControlPaths.distrust(folder: "/tmp/stillmoment-1000", Self.st(mode: 0o750, uid: 1000), socket: nil, me: 1000, german: false) != nil)
    }
}
