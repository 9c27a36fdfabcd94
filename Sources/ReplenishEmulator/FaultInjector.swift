/// SplitMix64 (Steele, Lea, Flood 2014): a small deterministic generator, so that a seeded fault rate gives
/// the same faults for the same sequence of requests on every run and platform.
struct SplitMix64: Sendable {
    private var state: UInt64

    init(seed: UInt64) { self.state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A double in `[0, 1)` from the top 53 bits of the next value.
    mutating func nextUnit() -> Double {
        Double(next() >> 11) * 0x1p-53
    }
}

/// Decides which requests get a fault: first the queue of next-N faults by path prefix, then the seeded random
/// rate. Requests under `/admin/` never get one.
struct FaultInjector: Sendable {
    /// One `POST /admin/faults`: the next `remaining` requests whose path starts with `path` get `fault`.
    struct Entry: Sendable {
        var path: String
        var remaining: Int
        var fault: Fault
    }

    /// `POST /admin/fault-rate`: each request under one of `paths` gets, with probability `rate`, one of
    /// `kinds` drawn uniformly.
    struct RandomRate: Sendable {
        var rate: Double
        var seed: UInt64
        var paths: [String]
        var kinds: [String]
        var faults: [Fault]
        var generator: SplitMix64
        /// Requests that matched `paths` (each draws once from the generator).
        var requestsSeen = 0
        var faultsInjected = 0

        var json: JSONValue {
            .obj([
                "rate": .number(rate), "seed": .number(Double(seed)), "paths": .array(paths.map { .string($0) }),
                "kinds": .array(kinds.map { .string($0) }), "requestsSeen": .number(Double(requestsSeen)),
                "faultsInjected": .number(Double(faultsInjected)),
            ])
        }
    }

    private(set) var queue: [Entry] = []
    var random: RandomRate?

    static func isExempt(_ lowercasedPath: String) -> Bool {
        lowercasedPath.hasPrefix("/admin/") || lowercasedPath == "/admin"
    }

    mutating func enqueue(_ entry: Entry) {
        queue.append(entry)
    }

    /// Empties the queue and turns the random rate off; returns how many queue entries there were.
    mutating func clear() -> Int {
        defer {
            queue = []
            random = nil
        }
        return queue.count
    }

    /// The fault for a request with this path (percent-encoded, without the query), if any, using it up.
    mutating func take(forPath path: String) -> Fault? {
        let lowercased = path.lowercased()
        guard !Self.isExempt(lowercased) else { return nil }
        if let index = queue.firstIndex(where: { lowercased.hasPrefix($0.path.lowercased()) }) {
            let fault = queue[index].fault
            queue[index].remaining -= 1
            if queue[index].remaining <= 0 { queue.remove(at: index) }
            return fault
        }
        guard var random, random.paths.contains(where: { lowercased.hasPrefix($0.lowercased()) }) else {
            return nil
        }
        defer { self.random = random }
        random.requestsSeen += 1
        guard random.generator.nextUnit() < random.rate else { return nil }
        let fault = random.faults[Int(random.generator.next() % UInt64(random.faults.count))]
        random.faultsInjected += 1
        return fault
    }

    var json: JSONValue {
        .obj([
            "queue": .array(
                queue.map {
                    .obj(["path": .string($0.path), "remaining": .number(Double($0.remaining)), "fault": $0.fault.json])
                }),
            "rate": random?.json ?? .null,
        ])
    }
}
