// Waiting for unplugged input devices to come back without a timer: the folder nearest to
// each missing device's path that exists (its by-path or by-id folder, or /dev/input while
// that folder is gone too) and the input root are watched with inotify; the descriptor is
// in the daemon's poll set and wakes it when a node appears there or changes its
// permissions. Nothing is watched (and no descriptor held) while every device is open.
import CSystem
import Glibc

final class DeviceAppearance {
    /// The inotify descriptor, -1 when nothing is watched.
    private(set) var fd: Int32 = -1

    deinit { stop() }

    /// Watches the folders for these missing device paths from now on (nothing when there
    /// are none). False when inotify cannot be had (no descriptor or no watch left): the
    /// caller then tries the devices on a timer.
    func wait(for paths: [String], roots: [String]) -> Bool {
        stop()
        guard !paths.isEmpty else { return true }
        let made = sm_inotify_open()
        guard made >= 0 else { return false }
        fd = made
        var folders = Set(roots)
        for path in paths { folders.insert(Self.nearestFolder(of: path)) }
        for folder in folders.sorted() {
            // A folder gone since it was looked at: its parent instead. Any other failure
            // (ENOSPC: the user's watches are used up) leaves the devices to the timer.
            var at = folder
            var watch = sm_inotify_watch_folder(fd, at)
            while watch == -ENOENT && at != "/" {
                at = Self.nearestFolder(of: at)
                watch = sm_inotify_watch_folder(fd, at)
            }
            if watch < 0 {
                stop()
                return false
            }
        }
        return true
    }

    /// Reads what happened (something appeared or changed: the caller looks again).
    func drain() {
        if fd >= 0 { _ = sm_inotify_drain(fd) }
    }

    func stop() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    /// The nearest folder of `path` that exists (its parent, or further up).
    static func nearestFolder(of path: String) -> String {
        var folder = path
        while let slash = folder.lastIndex(of: "/") {
            folder = String(folder[..<slash])
            if folder.isEmpty { return "/" }
            var st = stat()
            if stat(folder, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR { return folder }
        }
        return "/"
    }

    /// Whether the node at `path` is not there (missing, or a link to nothing): then its
    /// appearance is waited for; a node that is there but cannot be used is tried again.
    static func nodeMissing(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) != 0 && (errno == ENOENT || errno == ENOTDIR)
    }
}
