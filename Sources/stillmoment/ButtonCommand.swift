// `button`: a Linux input device as the daemon's button (a GPIO key through gpio-key, a USB
// foot switch, a presenter, a Bluetooth remote): add (a key and the actions of its press,
// hold and double press), list, remove, and test (print the keys a device sends). Stored in
// the catalog (ButtonStore); a running daemon is told to read them again.
import ArgumentParser
import CSystem
import Glibc
import StillMomentAudio
import StillMomentControl
import StillMomentCore

struct ButtonCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "button",
        abstract: "A key of an input device that starts, pauses or stops a session.",
        discussion: """
            stillmoment button add /dev/input/by-path/platform-button@11-event --key KEY_ENTER \
            --press "timer --preset morning" --hold stop --double toggle
            ACTION: \(ButtonAction.forms). A press is taken when the key goes down if it has no \
            hold or double action, else when it is released; a hold is 1 s; a double press comes within 400 ms; \
            contact chatter within 20 ms counts as one press. The daemon must be able to read the device (the \
            `input` group).
            """,
        subcommands: [Add.self, List.self, Remove.self, Test.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Add a button: DEVICE --key KEY and its actions.")
        @Argument(help: "The input device (a path under /dev/input; by-path or by-id links survive a replug).") var device: String
        @Option(help: "The key (KEY_ENTER, KEY_SPACE, BTN_0, or its code; `button test` shows them).") var key: String = "KEY_ENTER"
        @Option(help: "The action of a press.") var press: String?
        @Option(help: "The action of a hold (1 s).") var hold: String?
        @Option(help: "The action of a double press.") var double: String?

        func run() throws {
            var actions: [Gesture.Kind: String] = [:]
            actions[.press] = press
            actions[.hold] = hold
            actions[.double] = double
            do {
                let b = try ButtonStore(store: try openStore()).add(device: device, key: key, actions: actions)
                Console.out(tr("button \(b.id): \(ButtonCommand.line(b))", "Taste \(b.id): \(ButtonCommand.line(b))"))
                do throws(CoreError) { _ = try b.device.resolve() } catch {
                    Console.warning(tr("\(Display.clean(b.device.path)) cannot be used now (\(error.text(.current))); the daemon keeps trying",
                                       "\(Display.clean(b.device.path)) ist jetzt nicht benutzbar (\(error.text(.current))); der Daemon versucht es weiter"))
                }
                ButtonCommand.notifyDaemon(start: true)
            } catch let error as CoreError {
                throw Console.fail(error)
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the buttons (id, device, key, actions).")
        func run() throws {
            do {
                let buttons = try ButtonStore(store: try openStore()).all()
                if buttons.isEmpty { Console.out(tr("no buttons (add one with `stillmoment button add DEVICE --press ACTION`)", "keine Tasten (eine hinzufügen mit `stillmoment button add GERÄT --press AKTION`)")) }
                for b in buttons { Console.out("\(String(b.id).padded(to: 4)) \(ButtonCommand.line(b))") }
            } catch let error as CoreError {
                throw Console.fail(error)
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove a button by its id (from `button list`).")
        @Argument(help: "The button's id.") var id: String
        func run() throws {
            guard let n = Int64(id), n > 0 else {
                throw Console.fail(tr("'\(Display.clean(String(id.prefix(40))))' is not a button's id (see `stillmoment button list`)",
                                      "'\(Display.clean(String(id.prefix(40))))' ist keine Tastennummer (siehe `stillmoment button list`)"), code: 2)
            }
            do {
                guard try ButtonStore(store: try openStore()).remove(id: n) else {
                    throw Console.fail(tr("no button \(n) (see `stillmoment button list`)", "keine Taste \(n) (siehe `stillmoment button list`)"), code: 2)
                }
                Console.out(tr("button \(n) removed", "Taste \(n) entfernt"))
                ButtonCommand.notifyDaemon()
            } catch let error as CoreError {
                throw Console.fail(error)
            }
        }
    }

    struct Test: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "test", abstract: "Print the keys a device sends (until Ctrl-C).")
        @Argument(help: "The input device.") var device: String
        @Option(help: "Stop after this many seconds.") var seconds: Double?

        func run() throws {
            let resolved: String
            do throws(CoreError) { resolved = try InputDevicePath(device).resolve() } catch { throw Console.fail(error) }
            let fd = sm_evdev_open(resolved)
            guard fd >= 0 else {
                if -fd == EACCES || -fd == EPERM {
                    throw Console.fail(tr("cannot read \(Display.clean(device)): permission denied; add yourself to the 'input' group (sudo adduser $USER input) and log in again",
                                          "\(Display.clean(device)) ist nicht lesbar: keine Berechtigung; tritt der Gruppe 'input' bei (sudo adduser $USER input) und melde dich neu an"))
                }
                throw Console.fail(tr("cannot open \(Display.clean(device)): \(String(cString: strerror(-fd)))", "\(Display.clean(device)) lässt sich nicht öffnen: \(String(cString: strerror(-fd)))"))
            }
            defer { close(fd) }
            var name = [CChar](repeating: 0, count: 128)
            if sm_evdev_name(fd, &name, Int32(name.count)) > 0 {
                Console.out("\(Display.clean(String(decoding: name.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)))")
            }
            Console.out(tr("press the keys (Ctrl-C ends)", "drücke die Tasten (Strg-C beendet)"))
            let stop = StopFlag([SIGINT, SIGTERM])
            let end = seconds.map { MonotonicClock.seconds() + $0 }
            let size = Int(sm_input_event_size())
            var buf = [UInt8](repeating: 0, count: size * 64)
            var events = [sm_key_event](repeating: sm_key_event(), count: 64)
            while stop.received == nil {
                if let end, MonotonicClock.seconds() >= end { break }
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&p, 1, 100) > 0 else { continue }
                let n = read(fd, &buf, buf.count)
                if n < 0 && (errno == EAGAIN || errno == EINTR) { continue }
                if n <= 0 {
                    throw Console.fail(tr("\(Display.clean(device)) went away", "\(Display.clean(device)) ist verschwunden"))
                }
                let count = Int(sm_evdev_decode(buf, Int32(n), &events, Int32(events.count)))
                for e in events[0..<count] {
                    let what = e.value == 1 ? tr("down", "gedrückt") : e.value == 0 ? tr("up", "losgelassen") : tr("repeat", "wiederholt")
                    Console.out("\(KeyName.name(Int(e.code))) (\(e.code)) \(what)")
                }
            }
        }
    }

    static func line(_ b: Button) -> String {
        var words = [b.device.path, "--key", KeyName.name(b.key)]
        for kind in Gesture.Kind.allCases { if let a = b.actions[kind] { words += ["--\(kind.rawValue)", a] } }
        return words.map(ShellWords.quote).joined(separator: " ")
    }

    /// Tells a running daemon to read the buttons and hooks again; with `start`, starts one
    /// (a daemon that watches a button stays).
    static func notifyDaemon(start: Bool = false) {
        do {
            let client = try ControlClient.connect(startIfNeeded: start)
            try client.send(.reschedule)
        } catch {
            if start { Console.warning(tr("the daemon could not be told: \(error.description)", "der Daemon ließ sich nicht benachrichtigen: \(error.description)")) }
        }
    }
}
