import ArgumentParser
import Logging

/// The `--log-level` values: swift-log's levels, parsed by the argument parser (a wrapper rather than a
/// retroactive conformance of `Logger.Level`, which a future swift-log could add itself).
enum LogLevel: String, CaseIterable, ExpressibleByArgument, Sendable {
    case trace, debug, info, notice, warning, error, critical

    var level: Logger.Level { Logger.Level(rawValue: rawValue) ?? .info }
}
