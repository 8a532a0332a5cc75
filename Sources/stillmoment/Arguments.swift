import ArgumentParser

/// The command line before ArgumentParser reads it: a value that starts with a dash
/// (`--bells -2m`, `timer -5m`, `seek -15s`) is a value, not an unknown option.
enum Arguments {
    /// Options that take no value: a dash-led word after one of these is not its value.
    static let flags: Set<String> = [
        "--json", "--foreground", "--detach", "--resume", "--repair", "--on-demand", "--help", "--version",
    ]

    /// `-2m`, `-15s`, `-0:30`, `-5`: what a negative time or number looks like.
    static func looksNegative(_ word: String) -> Bool {
        guard word.count >= 2, word.hasPrefix("-"), let second = word.dropFirst().first else { return false }
        return second.isASCII && (second.isNumber || second == ".")
    }

    /// `--opt -2m` becomes `--opt=-2m`; a dash-led positional moves behind `--`, so the
    /// command sees it and can say what is wrong with it (a negative duration) in its
    /// own words.
    static func normalized(_ args: [String]) -> [String] {
        var out: [String] = []
        var trailing: [String] = []
        var i = 0
        while i < args.count {
            let word = args[i]
            if word == "--" {
                out += args[i...]
                return out + trailing
            }
            if word.hasPrefix("--"), !word.contains("="), !flags.contains(word),
               i + 1 < args.count, looksNegative(args[i + 1]) {
                out.append(word + "=" + args[i + 1])
                i += 2
                continue
            }
            if looksNegative(word) {
                trailing.append(word)
            } else {
                out.append(word)
            }
            i += 1
        }
        return trailing.isEmpty ? out : out + ["--"] + trailing
    }
}
