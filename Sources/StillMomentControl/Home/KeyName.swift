// Key names as in linux/input-event-codes.h (KEY_ENTER is 28), for `button add --key` and
// `button test`: the keys a button, a foot switch, a presenter or a remote sends, or any
// code as a number (1–767).
import StillMomentCore

public enum KeyName {
    static let table: [(String, Int)] = {
        var t: [(String, Int)] = [
            ("KEY_ESC", 1), ("KEY_BACKSPACE", 14), ("KEY_TAB", 15), ("KEY_ENTER", 28), ("KEY_SPACE", 57),
            ("KEY_UP", 103), ("KEY_PAGEUP", 104), ("KEY_LEFT", 105), ("KEY_RIGHT", 106), ("KEY_DOWN", 108), ("KEY_PAGEDOWN", 109),
            ("KEY_MUTE", 113), ("KEY_VOLUMEDOWN", 114), ("KEY_VOLUMEUP", 115), ("KEY_POWER", 116), ("KEY_PAUSE", 119),
            ("KEY_NEXTSONG", 163), ("KEY_PLAYPAUSE", 164), ("KEY_PREVIOUSSONG", 165), ("KEY_STOPCD", 166),
            ("KEY_PLAY", 207), ("KEY_SELECT", 0x161), ("KEY_OK", 0x160),
            ("BTN_0", 0x100), ("BTN_1", 0x101), ("BTN_LEFT", 0x110), ("BTN_RIGHT", 0x111), ("BTN_MIDDLE", 0x112),
            ("BTN_TRIGGER_HAPPY1", 0x2c0),
        ]
        for (i, c) in "1234567890".enumerated() { t.append(("KEY_\(c)", i + 2)) }
        for (row, start) in [("QWERTYUIOP", 16), ("ASDFGHJKL", 30), ("ZXCVBNM", 44)] {
            for (i, c) in row.enumerated() { t.append(("KEY_\(c)", start + i)) }
        }
        for f in 1...10 { t.append(("KEY_F\(f)", 58 + f)) }
        t.append(("KEY_F11", 87))
        t.append(("KEY_F12", 88))
        return t
    }()

    /// The code of a name (KEY_ENTER, enter, 28).
    public static func code(_ text: String) throws(CoreError) -> Int {
        let upper = text.uppercased()
        if let n = Int(text) {
            if n >= 1 && n <= 767 { return n }
        } else {
            for (name, code) in table where name == upper || name == "KEY_" + upper { return code }
        }
        throw CoreError.badValue(option: "key", reason: both("'\(Display.clean(String(text.prefix(40))))' is not a key (KEY_ENTER, KEY_SPACE, BTN_0, or a code 1–767; `stillmoment button test DEVICE` shows a device's)",
                                                         "'\(Display.clean(String(text.prefix(40))))' ist keine Taste (KEY_ENTER, KEY_SPACE, BTN_0 oder ein Code 1–767; `stillmoment button test GERÄT` zeigt die eines Geräts)"))
    }

    /// The name of a code (KEY_ENTER), or the number.
    public static func name(_ code: Int) -> String {
        table.first(where: { $0.1 == code })?.0 ?? String(code)
    }
}
