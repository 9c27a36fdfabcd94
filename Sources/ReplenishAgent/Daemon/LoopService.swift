import ServiceLifecycle

/// One long-running part of the daemon as a swift-service-lifecycle `Service`: its loop is cancelled on
/// graceful shutdown (SIGTERM/SIGINT), and the group stops in reverse order of the list.
struct LoopService: Service {
    let name: String
    let body: @Sendable () async throws -> Void

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown { try await body() }
        } catch is CancellationError {
            // The group is shutting down: a cancelled loop has finished its job.
        }
    }
}
