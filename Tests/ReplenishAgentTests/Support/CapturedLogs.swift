import Logging
import Synchronization

/// Every log line of a logger, with its metadata: for tests that check what was logged, and that no secret was.
final class CapturedLogs: Sendable {
    let lines = Mutex<[String]>([])
    var text: String { lines.withLock { $0.joined(separator: "\n") } }
    var logger: Logger { Logger(label: "test") { _ in Handler(logs: self) } }

    struct Handler: LogHandler {
        let logs: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            logs.lines.withLock { $0.append("\(event.message) \(event.metadata ?? [:])") }
        }
    }
}
