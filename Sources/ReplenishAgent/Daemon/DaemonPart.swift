import ServiceLifecycle

/// A long-running part of the daemon as the service group runs it. Each part is a named type declared next to
/// the code it runs (`TokenManager.Part`, `OrderService.Part`, …); `Agent` only lists them.
/// - `work()` runs until the group's graceful shutdown begins; then it is cancelled, and a cancellation is its
///   normal end (not an error of the group).
/// - `follow()` reads the streams the part follows (token events, outbox updates) in a task of its own beside
///   the work, and is cancelled when the work ends. Most parts follow nothing.
protocol DaemonPart: Service, CustomStringConvertible {
    func work() async throws
    func follow() async
}

extension DaemonPart {
    func follow() async {}

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingDiscardingTaskGroup { tasks in
                    tasks.addTask { await follow() }
                    try await work()
                    tasks.cancelAll()
                }
            }
        } catch is CancellationError {
            // The group is shutting down: a cancelled part has finished its job.
        }
    }
}
