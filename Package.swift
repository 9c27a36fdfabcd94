// swift-tools-version: 6.1
import PackageDescription

// The device binary (`replenish-agent`) links libcurl, libgpiod and libcrypto from the system and a few
// Foundation-free Swift packages. The emulator is a separate product that shares no code with the agent.
let package = Package(
    name: "replenish-agent",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "replenish-agent", targets: ["ReplenishAgent"]),
        .executable(name: "replenish-emulator", targets: ["ReplenishEmulator"]),
        .executable(name: "replenish-companion", targets: ["ReplenishCompanion"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    ],
    targets: [
        // Typed wrappers for the variadic parts of libcurl that Swift cannot call.
        .target(name: "CCurl", linkerSettings: [.linkedLibrary("curl")]),
        // libgpiod (v1 or v2 API, chosen from the installed header at build time).
        .target(name: "CGpiod", linkerSettings: [.linkedLibrary("gpiod")]),
        // mallopt and the Swift runtime's global-executor hooks (System/LoopExecutor.swift, POSIX+Process.swift).
        .target(name: "CProcess"),
        // The commit and package version of this build (`--version`): from commit.h, which scripts/build-info.sh
        // writes (git-ignored), or "unknown" without it.
        .target(name: "CBuildInfo"),
        // OpenSSL's libcrypto for SHA-256 (PKCE); libcurl already loads it, so it costs the device nothing.
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // libavahi-client: the pairing port's DNS-SD advertisement through avahi-daemon, its state machine on
        // Avahi's own thread. Built with Debian's libavahi-client-dev headers; loaded with dlopen when the pairing
        // window first opens, not linked, so a paired device maps none of it (Sources/CAvahi/cavahi_library.c).
        .target(name: "CAvahi"),
        // NetworkManager's D-Bus API for the Wi-Fi setup mode, through libdbus-1 loaded with dlopen when setup mode
        // is first needed, not linked (Sources/CNetworkManager/cnm_library.c).
        .target(name: "CNetworkManager"),
        .executableTarget(
            name: "ReplenishAgent",
            dependencies: [
                "CCurl", "CGpiod", "CCrypto", "CAvahi", "CNetworkManager", "CProcess", "CBuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "ReplenishEmulator",
            dependencies: [
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            exclude: ["README.md"]
        ),
        // A bench companion for a real Amazon account (docs/companion-app.md): shares no code with the agent or the
        // emulator, like the emulator; never part of the device binary.
        .executableTarget(
            name: "ReplenishCompanion",
            dependencies: [
                // The system's libcrypto (a module map, no code of the agent's): the proofs' HMAC in process, so the
                // label's key is never an argument of another program (which any local user can read).
                "CCrypto",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // Fixtures (state files of every format version) are read by path, relative to the test sources.
        .testTarget(
            name: "ReplenishAgentTests",
            // NIOEmbedded: the server's handlers on an `EmbeddedChannel`, whose clock moves only when a test says.
            dependencies: [
                "ReplenishAgent", .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            exclude: ["Fixtures"]),
    ],
    swiftLanguageModes: [.v6]
)
