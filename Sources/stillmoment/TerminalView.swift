import Dispatch
import Glibc
import StillMomentControl
import StillMomentCore
import Synchronization

/// The terminal while a session plays: raw keys (no echo), one live line redrawn in
/// place, and the terminal restored however the session ends.
final class TerminalView {
    enum Key { case space, quit, left, right, detach, finish }

    private var saved = termios()
    private var raw = false
    private var lastWidth = 0

    init(interactive: Bool) {
        guard interactive, tcgetattr(0, &saved) == 0 else { return }
        var t = saved
        t.c_lflag &= ~tcflag_t(ICANON | ECHO)
        withUnsafeMutablePointer(to: &t.c_cc) { cc in
            cc.withMemoryRebound(to: cc_t.self, capacity: Int(NCCS)) { c in
                c[Int(VMIN)] = 0
                c[Int(VTIME)] = 0
            }
        }
        if tcsetattr(0, TCSANOW, &t) == 0 { raw = true }
        TerminalView.hideCursor(true)
    }

    deinit { restore() }

    func restore() {
        if raw {
            tcsetattr(0, TCSANOW, &saved)
            raw = false
            TerminalView.hideCursor(false)
        }
    }

    private static func hideCursor(_ hide: Bool) {
        var s = hide ? "\u{1B}[?25l" : "\u{1B}[?25h"
        s.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
    }

    /// Redraws the live line.
    func show(_ line: String) {
        var s = "\r\u{1B}[2K" + Display.clean(line)
        s.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
    }

    /// Ends the live line so later output starts on a new one.
    func finishLine(_ line: String) {
        show(line)
        var s = "\n"
        s.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
    }

    /// Waits up to `timeoutMs` for a key.
    func key(timeoutMs: Int32) -> Key? {
        var fds = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
        guard raw, poll(&fds, 1, timeoutMs) > 0 else {
            if !raw { usleep(useconds_t(timeoutMs) * 1000) }
            return nil
        }
        var buf = [UInt8](repeating: 0, count: 8)
        let n = read(0, &buf, buf.count)
        guard n > 0 else { return nil }
        switch buf[0] {
        case 0x20: return .space
        case UInt8(ascii: "q"), UInt8(ascii: "Q"), 0x03: return .quit
        case UInt8(ascii: "d"), UInt8(ascii: "D"): return .detach
        case UInt8(ascii: "f"), UInt8(ascii: "F"): return .finish
        case 0x1B where n >= 3 && buf[1] == UInt8(ascii: "["):
            if buf[2] == UInt8(ascii: "C") { return .right }
            if buf[2] == UInt8(ascii: "D") { return .left }
            return nil
        default: return nil
        }
    }
}

extension StopFlag {
    /// SIGINT, SIGTERM and SIGHUP become a request to stop (or detach), handled by the
    /// main loop, which restores the terminal first.
    static func interactive() -> StopFlag { StopFlag([SIGINT, SIGTERM, SIGHUP]) }
}
