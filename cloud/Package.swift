// swift-tools-version: 6.1
import PackageDescription

// replenish-cloud: the maker's cloud for units in program alexa. It takes the units' reports and the
// customers' claims, answers the Alexa smart home directives of the maker's skill, and sends the skill's
// events to Alexa's event gateway. A package of its own beside the agent's: the device binary, its package
// graph and its tests do not change with it, and it shares no code with the agent or the emulator.
let package = Package(
    name: "replenish-cloud",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "replenish-cloud", targets: ["ReplenishCloudCommand"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
    ],
    targets: [
        // The service: decisions (reports, claims, directives, the event outbox) and the effects around them
        // (PostgreSQL, the event gateway, LWA), as a library the tests and the command share.
        .target(
            name: "ReplenishCloud",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .executableTarget(
            name: "ReplenishCloudCommand",
            dependencies: [
                "ReplenishCloud",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Every suite runs against a real PostgreSQL server that scripts/cloud-test.sh starts
        // (REPLENISH_CLOUD_TEST_DATABASE); none mocks the database.
        .testTarget(
            name: "ReplenishCloudTests",
            dependencies: [
                "ReplenishCloud",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
