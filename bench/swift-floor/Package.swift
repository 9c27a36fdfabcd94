// swift-tools-version: 6.1
import PackageDescription

// The Swift floor of scripts/swift-floor.sh: the packages and C libraries the device binary links, each used
// as little as the agent's start uses it, and nothing of the agent's own. Not part of the device. The versions
// are the agent's: the script copies the repository's Package.resolved here before it builds.
let package = Package(
    name: "swift-floor",
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    ],
    targets: [
        .target(name: "CFloor", linkerSettings: [.linkedLibrary("curl"), .linkedLibrary("gpiod")]),
        .executableTarget(
            name: "swift-floor",
            dependencies: [
                "CFloor",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/SwiftFloor"
        ),
    ],
    swiftLanguageModes: [.v6]
)
