/// The agent's random numbers (backoff jitter, refresh jitter): the system's CSPRNG on a device, so that
/// devices never share a sequence (no time seeds); a seeded SplitMix64 in tests, so runs repeat.
enum RandomSource: RandomNumberGenerator, Sendable {
    case system
    case seeded(state: UInt64)

    mutating func next() -> UInt64 {
        switch self {
        case .system:
            var generator = SystemRandomNumberGenerator()
            return generator.next()
        case .seeded(var state):
            state &+= 0x9E37_79B9_7F4A_7C15
            self = .seeded(state: state)
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }
}
