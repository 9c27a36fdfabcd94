/// Which connection makes room for a new one. Pure.
enum ConnectionAdmission {
    /// Which connections give way first: slow ones (owing a request for longer than the grace), then
    /// those closing after an error answer, then fresh ones; one being answered never.
    enum State: Int, Comparable {
        case slow, lingering, fresh, answering

        static func < (lhs: State, rhs: State) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    struct Connection {
        var id: Int
        var peer: String
        var state: State
    }

    enum Decision: Equatable {
        case admit
        case admitEvicting(Int)
        case refuse
    }

    /// `open` is in the order the connections were admitted. A peer at its own cap makes room among its own
    /// connections; a full server evicts from the peer holding the most. The oldest slow connection goes,
    /// else the oldest closing one, else the oldest fresh one; when every candidate is being answered, the
    /// new connection is refused.
    static func decide(peer: String, open: [Connection], maximum: Int, maximumPerPeer: Int) -> Decision {
        var perPeer: [String: Int] = [:]
        for connection in open { perPeer[connection.peer, default: 0] += 1 }
        let candidates: [Connection]
        if perPeer[peer, default: 0] >= maximumPerPeer {
            candidates = open.filter { $0.peer == peer }
        } else if open.count >= maximum {
            let most = perPeer.values.max() ?? 0
            let crowded = Set(perPeer.filter { $0.value == most }.keys)
            candidates = open.filter { crowded.contains($0.peer) }
        } else {
            return .admit
        }
        // The first of the lowest state: the oldest of its kind.
        guard let victim = candidates.filter({ $0.state != .answering }).min(by: { $0.state < $1.state }) else {
            return .refuse
        }
        return .admitEvicting(victim.id)
    }
}
