// swift-tools-version: 6.0
import PackageDescription

// The functions the daemon and the CLI run, placed together by the linker (gold, Swift's
// linker on Linux) in the release build: written by scripts/code-order.sh, which says why.
let codeOrder = String(#filePath.dropLast("Package.swift".count)) + "scripts/code-order.txt"

let package = Package(
    name: "stillmoment",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "StillMomentAudio", targets: ["StillMomentAudio"]),
        .library(name: "StillMomentCore", targets: ["StillMomentCore"]),
        .executable(name: "stillmoment", targets: ["stillmoment"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // Property-based tests (generators and shrinking in Swift Testing): tests only.
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
    ],
    targets: [
        // System libraries (Debian: libmpg123-dev, libfaad-dev, libsoxr-dev).
        .systemLibrary(name: "CMpg123", pkgConfig: "libmpg123"),
        .systemLibrary(name: "CFaad"),
        .systemLibrary(name: "CSoxr", pkgConfig: "soxr"),
        // For the library store (Debian: libxxhash-dev), and libebur128 (libebur128-dev) as
        // the tests' reference for the loudness meter.
        .systemLibrary(name: "CXXHash"),
        .systemLibrary(name: "CEbur128", pkgConfig: "libebur128"),
        // The real-time backend: the SPSC ring, the output thread and its device backends
        // (ALSA; PulseAudio through libpulse, loaded with dlopen).
        .target(
            name: "CAudio",
            linkerSettings: [.linkedLibrary("asound"), .linkedLibrary("pthread"), .linkedLibrary("m")]
        ),
        // The offline loudness meter (import) and file-system calls (O_DIRECT, writeback):
        // apart from the real-time target.
        .target(name: "CLoudness", linkerSettings: [.linkedLibrary("m")]),
        .target(name: "CFileIO"),
        .target(
            name: "StillMomentAudio",
            dependencies: ["CAudio", "CLoudness", "CFileIO", "CMpg123", "CFaad", "CSoxr"]
        ),
        // Core reaches C only through the audio layer (and xxHash for the store).
        .target(
            name: "StillMomentCore",
            dependencies: [
                "StillMomentAudio", "CXXHash",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // Unix sockets, peer credentials and a detached start: the daemon's system calls.
        .target(name: "CSystem"),
        // MQTT for the Home Assistant bridge: libmosquitto loaded with dlopen only when enabled.
        .target(name: "CMQTT", linkerSettings: [.linkedLibrary("dl"), .linkedLibrary("pthread")]),
        .target(
            name: "StillMomentControl",
            dependencies: [
                "StillMomentCore", "StillMomentAudio", "CSystem", "CMQTT", "CTLS",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The web app: an HTTP server of its own (a separate process, `stillmoment web`) that
        // speaks the daemon's typed protocol; its shell is hand-written and embedded as is.
        // TLS for the web app (--tls) and for sync with an https:// hub: OpenSSL 3 loaded with
        // dlopen only when one is used.
        .target(name: "CTLS", linkerSettings: [.linkedLibrary("dl")]),
        .target(
            name: "StillMomentWeb",
            dependencies: [
                "StillMomentCore", "StillMomentControl", "StillMomentAudio", "CTLS",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            resources: [
                .embedInCode("Shell/index.html"), .embedInCode("Shell/app.js"), .embedInCode("Shell/app.css"),
                .embedInCode("Shell/sw.js"), .embedInCode("Shell/manifest.webmanifest"), .embedInCode("Shell/icon.svg"),
            ]
        ),
        .executableTarget(
            name: "stillmoment",
            dependencies: [
                "StillMomentCore", "StillMomentControl", "StillMomentWeb",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            linkerSettings: [
                .unsafeFlags(["-Xlinker", "--section-ordering-file=\(codeOrder)"], .when(configuration: .release)),
            ]
        ),
        .executableTarget(
            name: "StillMomentBench",
            dependencies: ["StillMomentAudio", "StillMomentCore"]
        ),
        .testTarget(
            name: "StillMomentAudioTests",
            // libebur128: the reference the loudness meter is tested against.
            dependencies: ["StillMomentAudio", "CAudio", "CEbur128"]
        ),
        .testTarget(
            name: "StillMomentControlTests",
            dependencies: ["StillMomentControl", "StillMomentCore", .product(name: "Logging", package: "swift-log"),
                           .product(name: "PropertyBased", package: "swift-property-based")]
        ),
        // The CLI's own maps and texts: exit codes, status lines (the executable, tested).
        .testTarget(
            name: "StillMomentWebTests",
            dependencies: ["StillMomentWeb", "StillMomentCore", "StillMomentControl"]
        ),
        .testTarget(
            name: "StillMomentCLITests",
            dependencies: ["stillmoment", "StillMomentControl", "StillMomentCore"]
        ),
        .testTarget(
            name: "StillMomentCoreTests",
            dependencies: ["StillMomentCore", "StillMomentAudio",
                           .product(name: "GRDB", package: "GRDB.swift"),
                           .product(name: "PropertyBased", package: "swift-property-based")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
