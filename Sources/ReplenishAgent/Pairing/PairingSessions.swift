/// The pairing sessions `deviceInfo` starts, and how often a peer may start one. Pure; times come from
/// the caller's clock.
///
/// Each peer address has at most one session, and a new `deviceInfo` replaces only that peer's session, so
/// the newest session is always valid and a script on another machine calling `deviceInfo` in a loop cannot
/// replace the session of the phone that is pairing. A peer may start a session at most once per
/// `spacing` and `perMinute` times a minute (429 with the time to wait beyond).
///
/// At most `maximumPeers` sessions are kept. A new session that needs room takes it from the network
/// (`network(of:)`: an IPv4 /24, an IPv6 /64) holding the most sessions, whose oldest session goes (the
/// newcomer's own network first when it is one of those). So addresses of other networks, however many,
/// only replace each other's sessions and never the last session of a network; only when every network
/// holds a single session does the oldest of all go (an attacker with as many networks routed to the
/// device as sessions are kept).
struct PairingSessions<Instant: InstantProtocol, Value: Sendable>: Sendable where Instant.Duration == Duration {
    struct Session: Sendable {
        let id: String
        let peer: String
        let createdAt: Instant
        let value: Value
    }

    struct Limits: Sendable {
        var spacing: Duration = .seconds(2)
        var perMinute = 10
        var maximumPeers = 256
        /// Peers whose starts of the last minute are remembered (for `perMinute`); beyond, the peer that
        /// started least recently is forgotten.
        var maximumTrackedPeers = 1024
    }

    let limits: Limits
    /// Oldest first.
    private(set) var sessions: [Session] = []
    private var starts: [String: [Instant]] = [:]

    init(limits: Limits = Limits()) { self.limits = limits }

    /// Nil when `peer` may start a session now; otherwise how long it must wait.
    mutating func mayStart(peer: String, at now: Instant) -> Duration? {
        let minuteAgo = now.advanced(by: .seconds(-60))
        starts = starts.compactMapValues { times in
            let recent = times.filter { minuteAgo < $0 }
            return recent.isEmpty ? nil : recent
        }
        let recent = starts[peer] ?? []
        var wait: Duration = .zero
        if let last = recent.last { wait = max(wait, limits.spacing - last.duration(to: now)) }
        if recent.count >= limits.perMinute, let first = recent.first {
            wait = max(wait, .seconds(60) - first.duration(to: now))
        }
        return wait > .zero ? wait : nil
    }

    /// Starts `peer`'s session (call only after `mayStart` said yes), replacing its previous one.
    mutating func start(id: String, peer: String, value: Value, at now: Instant) {
        if starts[peer] == nil, starts.count >= limits.maximumTrackedPeers,
            let stalest = starts.min(by: { ($0.value.last ?? now) < ($1.value.last ?? now) })?.key
        {
            starts[stalest] = nil
        }
        starts[peer, default: []].append(now)
        sessions.removeAll { $0.peer == peer }
        while sessions.count >= max(limits.maximumPeers, 1), let victim = evictee(for: peer) {
            sessions.remove(at: victim)
        }
        sessions.append(Session(id: id, peer: peer, createdAt: now, value: value))
    }

    func session(id: String) -> Session? { sessions.first { $0.id == id } }

    /// Forgets every session (paired, or a new window): the rate limits stay.
    mutating func removeAll() { sessions.removeAll() }

    /// The index of the session that makes room for one of `peer`: the oldest of the network holding the
    /// most sessions; of several such networks, `peer`'s own, else the one whose oldest session is oldest.
    private func evictee(for peer: String) -> Int? {
        let networks = sessions.map { Self.network(of: $0.peer) }
        var counts: [String: Int] = [:]
        for network in networks { counts[network, default: 0] += 1 }
        guard let most = counts.values.max() else { return nil }
        let own = Self.network(of: peer)
        if counts[own] == most { return networks.firstIndex(of: own) }
        return networks.firstIndex { counts[$0] == most }
    }

    /// The network of a peer address, as eviction groups them: an IPv4 address's /24 (`192.168.1.0/24`),
    /// an IPv6 address's /64 (`fd00:0:0:1::/64`), an IPv4-mapped IPv6 address as IPv4; anything else (a
    /// name, a Unix socket's empty peer) is a network of its own.
    static func network(of peer: String) -> String {
        let address = peer.prefix { $0 != "%" }
        if let bytes = ipv4(address) { return "\(bytes[0]).\(bytes[1]).\(bytes[2]).0/24" }
        guard let groups = ipv6(address) else { return peer }
        if groups[0..<5].allSatisfy({ $0 == 0 }) && groups[5] == 0xffff {
            return "\(groups[6] >> 8).\(groups[6] & 0xff).\(groups[7] >> 8).0/24"
        }
        return groups[0..<4].map { String($0, radix: 16) }.joined(separator: ":") + "::/64"
    }

    /// `a.b.c.d` in decimal, or nil.
    private static func ipv4(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy({ $0.isASCII && $0.isNumber }),
                let byte = UInt8(part)
            else { return nil }
            bytes.append(byte)
        }
        return bytes
    }

    /// The eight groups of an IPv6 address (`::` and a dotted IPv4 tail allowed), or nil.
    private static func ipv6(_ text: Substring) -> [UInt16]? {
        func groups(_ part: Substring, dottedTail: Bool) -> [UInt16]? {
            if part.isEmpty { return [] }
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            var result: [UInt16] = []
            for (index, piece) in pieces.enumerated() {
                if dottedTail, index == pieces.count - 1, let bytes = ipv4(piece) {
                    result += [UInt16(bytes[0]) << 8 | UInt16(bytes[1]), UInt16(bytes[2]) << 8 | UInt16(bytes[3])]
                } else {
                    guard (1...4).contains(piece.count), piece.allSatisfy(\.isHexDigit),
                        let group = UInt16(piece, radix: 16)
                    else { return nil }
                    result.append(group)
                }
            }
            return result
        }
        if let gap = text.occurrences(of: "::").first {
            guard let head = groups(text[..<gap.lowerBound], dottedTail: false),
                let tail = groups(text[gap.upperBound...], dottedTail: true), head.count + tail.count < 8
            else { return nil }
            return head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail
        }
        guard let all = groups(text, dottedTail: true), all.count == 8 else { return nil }
        return all
    }
}
