import NIOCore
import Synchronization

extension LocalHTTPServer {
    /// The open connections and which one makes room for a new one (`ConnectionAdmission`).
    final class ConnectionBook: Sendable {
        private struct Entry {
            var id: Int
            var peer: String
            var tracker: ConnectionTracker
            var channel: any Channel
        }

        private let limits: Limits
        private let state = Mutex<(next: Int, open: [Entry], closing: Bool)>((0, [], false))

        init(limits: Limits) { self.limits = limits }

        /// The server stops: every open connection (to be closed), and no more admitted.
        func closeAll() -> [any Channel] {
            state.withLock { state in
                state.closing = true
                return state.open.map(\.channel)
            }
        }

        /// The new connection's id and the connection it evicts, or nil when it is refused.
        func admit(peer: String, tracker: ConnectionTracker, channel: any Channel) -> (Int, (any Channel)?)? {
            state.withLock { state in
                if state.closing { return nil }
                let now = NIODeadline.now().uptimeNanoseconds
                let grace = UInt64(limits.freshGrace.nanoseconds)
                let decision = ConnectionAdmission.decide(
                    peer: peer,
                    open: state.open.map {
                        ConnectionAdmission.Connection(
                            id: $0.id, peer: $0.peer, state: $0.tracker.state(now: now, grace: grace))
                    },
                    maximum: limits.maximumConnections, maximumPerPeer: limits.maximumConnectionsPerPeer)
                var victim: (any Channel)?
                switch decision {
                case .refuse: return nil
                case .admit: break
                case .admitEvicting(let id):
                    if let index = state.open.firstIndex(where: { $0.id == id }) {
                        victim = state.open.remove(at: index).channel
                    }
                }
                state.next += 1
                state.open.append(Entry(id: state.next, peer: peer, tracker: tracker, channel: channel))
                return (state.next, victim)
            }
        }

        func remove(_ id: Int) { state.withLock { $0.open.removeAll { $0.id == id } } }
    }
}
