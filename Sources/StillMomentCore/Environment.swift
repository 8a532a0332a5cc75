// Environment variables, read with getenv.
import Glibc

/// One environment variable at a time. (Not ProcessInfo's `environment`: it builds a
/// dictionary of every variable on each call, 5.4 M instructions of a CLI command's start
/// under callgrind.)
public enum Environment {
    /// The variable's value; nil when it is unset or empty.
    public static func value(_ key: String) -> String? {
        guard let p = getenv(key), p.pointee != 0 else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: p, count: strlen(p)), as: UTF8.self)
    }
}
