import ServiceLifecycle

/// A long-running part of the daemon as the service group runs it. Each part is a named type declared next to
/// the code it runs (`InputPipeline.Part`, `OrderTracker.Part`, `LoopPart` for the actors with a loop, …); `Agent`
/// only lists them.
/// - `work()` runs until the group's graceful shutdown begins; then it is cancelled, and a cancellation is its
///   normal end (not an error of the group).
/// - `follow()` reads the streams the part follows (token events, outbox updates) in a task of its own beside
///   the work, and is cancelled when the work ends. Most parts follow nothing.
/// - `mayEnd`: the part's job can be done before the stop (`SerialWatch`, `ClockWatch.Part`). Its work then ends and
///   the part waits for its turn of the stop, the group running on. It does not return: during a graceful
///   shutdown the group counts the return of any part but the one it is stopping as "finished unexpectedly",
///   whatever that part's termination behaviour (service-lifecycle 2.13.0), and the agent would exit 1. Any other
///   part that returns, or any part that throws, ends the group.
protocol DaemonPart: Service, CustomStringConvertible {
    func work() async throws
    func follow() async
    var mayEnd: Bool { get }
}

extension DaemonPart {
    func follow() async {}

    var mayEnd: Bool { false }

    /// The part as the service group runs it, named by its `description`. A name given here spares the group
    /// its own (`"\(service)"`, which asks the Swift runtime for the type's conformances: the first time for
    /// each type, a pass over every conformance record of the binary, about twenty before `READY=1`).
    var groupConfiguration: ServiceGroupConfiguration.ServiceConfiguration {
        ServiceGroupConfiguration.ServiceConfiguration(
            service: self, successTerminationBehavior: .cancelGroup, failureTerminationBehavior: .cancelGroup,
            serviceName: description)
    }

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingDiscardingTaskGroup { tasks in
                    tasks.addTask { await follow() }
                    try await work()
                    tasks.cancelAll()
                }
            }
            if mayEnd { try await gracefulShutdown() }
        } catch is CancellationError {
            // The group is shutting down: a cancelled part has finished its job.
        }
    }
}

/// An actor whose loop runs until it is cancelled (`TokenManager`, `DeregistrationQueue`).
protocol LoopingActor: Actor {
    func run() async
}

/// A looping actor that also follows the token events: a pairing lets it go, a lost pairing stops it
/// (`DeliveryLoop`, `Duties`, `CodeLinker`).
protocol TokenFollower: LoopingActor {
    nonisolated func follow(tokens: AsyncStream<TokenEvent>) async
}

/// A looping actor as the daemon runs it.
struct LoopPart<Looping: LoopingActor>: DaemonPart {
    let service: Looping
    let description: String

    func work() async { await service.run() }
}

/// A looping actor that follows the token events, as the daemon runs it.
struct TokenFollowingPart<Following: TokenFollower>: DaemonPart {
    let service: Following
    let tokens: AsyncStream<TokenEvent>
    let description: String

    func follow() async { await service.follow(tokens: tokens) }
    func work() async { await service.run() }
}
