/// The task a token refresh runs in, and how a stop reaches it. The refresh runs in a task of its own (callers
/// share it), which a caller's cancellation does not reach by itself: a cancelled caller (the agent stopping:
/// the schedule and every service are cancelled) cancels it (`value(of:)`). The call to LWA inside it then still
/// gets `stopGrace` to be answered (`finishingWithinTheStopGrace`): where LWA rotates refresh tokens it may have
/// ended the one on disk already, and only its answer carries the new one. A token write under way returns once
/// the new file is in place (`StateStore.save`). So a stop stays within its 10 s and keeps a rotation LWA answered.
enum RefreshTask {
    /// How long a refresh already sent to LWA may still take once the agent stops: the stop's 10 s less the
    /// second curl takes to abort and the write of the answer. A refresh of 6 s interrupted 1 s in is answered.
    static var stopGrace: Duration { .seconds(6) }

    /// The refresh's result; a cancelled caller cancels the refresh.
    static func value(of task: Task<TokenSet, any Error>) async throws(AgentError) -> TokenSet {
        do {
            return try await withTaskCancellationHandler {
                try await task.value
            } onCancel: {
                task.cancel()
            }
        } catch let error as AgentError { throw error } catch {
            throw AgentError(.network, "refresh interrupted")
        }
    }

    /// Runs `call` (a request to LWA) in a task that a cancellation of the caller ends only `stopGrace` later on
    /// `clock`: LWA's answer to a request that has left may hold the only copy of a rotated refresh token. A call
    /// still unanswered then is aborted; LWA may have rotated the token meanwhile, which the device cannot know,
    /// and the restart tries the token on disk.
    static func finishingWithinTheStopGrace<C: Clock>(
        clock: C, _ call: @escaping @Sendable () async throws(AgentError) -> TokenGrant
    ) async throws(AgentError) -> TokenGrant where C.Duration == Duration {
        let inner = Task { () async throws -> TokenGrant in try await call() }
        do {
            return try await withTaskCancellationHandler {
                try await inner.value
            } onCancel: {
                Task {
                    try? await clock.loopSleep(for: stopGrace)
                    inner.cancel()
                }
            }
        } catch let error as AgentError { throw error } catch {
            throw AgentError(.network, "refresh interrupted")
        }
    }
}
