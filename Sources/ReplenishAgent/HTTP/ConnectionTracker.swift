import NIOCore
import Synchronization

extension LocalHTTPServer {
    /// What the server knows of one connection, shared between its event loop and the accept loop.
    final class ConnectionTracker: Sendable {
        /// A complete request is being answered: the connection is busy, not slow.
        let answering = Atomic(false)
        /// Answered with an error and closing (lingering close).
        let lingering = Atomic(false)
        /// Since when (`NIODeadline` nanoseconds) the connection owes a request: its start, or the end of
        /// its last answer.
        let waitingSince = Atomic(NIODeadline.now().uptimeNanoseconds)

        /// What `ConnectionAdmission` needs to know.
        func state(now: UInt64, grace: UInt64) -> ConnectionAdmission.State {
            if answering.load(ordering: .relaxed) { return .answering }
            if lingering.load(ordering: .relaxed) { return .lingering }
            let since = waitingSince.load(ordering: .relaxed)
            return now >= since && now - since >= grace ? .slow : .fresh
        }
    }
}
