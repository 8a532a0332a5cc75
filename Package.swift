// swift-tools-version: 6.0
import PackageDescription

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
        // The real-time backend: SPSC ring and the ALSA output thread.
        .target(
            name: "CAudio",
            linkerSettings: [.linkedLibrary("asound"), .linkedLibrary("pthread"), .linkedLibrary("m")]
        ),
        .target(
            name: "StillMomentAudio",
            dependencies: ["CAudio", "CMpg123", "CFaad", "CSoxr"]
        ),
        .target(
            name: "StillMomentCore",
            dependencies: [
                "StillMomentAudio", "CAudio", "CXXHash", "CMpg123",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // Unix sockets, peer credentials and a detached start: the daemon's system calls.
        .target(name: "CSystem"),
        .target(
            name: "StillMomentControl",
            dependencies: [
                "StillMomentCore", "StillMomentAudio", "CSystem",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "stillmoment",
            dependencies: [
                "StillMomentCore", "StillMomentControl",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "StillMomentBench",
            dependencies: ["StillMomentAudio", "StillMomentCore"]
        ),
        .testTarget(
            name: "StillMomentAudioTests",
            dependencies: ["StillMomentAudio", "CAudio"]
        ),
        .testTarget(
            name: "StillMomentControlTests",
            dependencies: ["StillMomentControl", "StillMomentCore", .product(name: "Logging", package: "swift-log"),
                           .product(name: "PropertyBased", package: "swift-property-based")]
        ),
        .testTarget(
            name: "StillMomentCoreTests",
            // libebur128: the reference the loudness meter is tested against.
            dependencies: ["StillMomentCore", "StillMomentAudio", "CAudio", "CEbur128",
                           .product(name: "PropertyBased", package: "swift-property-based")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
