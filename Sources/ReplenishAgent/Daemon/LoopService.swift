import ServiceLifecycle

/// One long-running part of the daemon as a swift-service-lifecycle `Service`: its loop is cancelled on
/// graceful shutdown (SIGTERM/SIGINT), and the group stops in reverse order of the list. `following` reads the
/// streams the part reacts to (new tokens, placed orders) beside the loop, and ends when the loop does.
struct LoopService: Service {
    let name: String
    let following: (@Sendable () async -> Void)?
    let body: @Sendable () async throws -> Void

    init(
        name: String, following: (@Sendable () async -> Void)? = nil,
        run body: @escaping @Sendable () async throws -> Void
    ) {
        self.name = name
        self.following = following
        self.body = body
    }

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown { [following, body] in
                guard let following else { return try await body() }
                try await withThrowingDiscardingTaskGroup { tasks in
                    tasks.addTask { await following() }
                    try await body()
                    tasks.cancelAll()
                }
            }
        } catch is CancellationError {
            // The group is shutting down: a cancelled loop has finished its job.
        }
    }
}
