/// Whether a serial read from a file that differs from the pairing's is a new unit or a glitch. A serial file can
/// read wrong at one start (a slow EEPROM, a partition mounted late, a file cut short): acting on that would
/// deregister the pairing for good. So a differing serial is acted on only once the same new serial has been read
/// for `span` of this run's clock (no glitch lasts that long; a clock step does not shorten it), re-read every
/// `rereadEvery`; a serial that reads as the pairing's again ends the doubt, and one that cannot be read (or fails
/// the serial rule) starts the span over. Meanwhile the pairing orders nothing (`TokenManager.hold`).
struct SerialSettling<Instant: InstantProtocol> where Instant.Duration == Duration {
    static var span: Duration { .seconds(600) }
    static var rereadEvery: Duration { .seconds(5) }

    /// What the pairing was made for.
    let recorded: DeviceIdentity
    /// The differing identity read last, and since when it has read the same.
    private(set) var candidate: (identity: DeviceIdentity, since: Instant)?

    enum Verdict: Equatable {
        /// The serial reads as the pairing's again: the pairing is kept, with `identity` (its case as read now).
        case same(DeviceIdentity)
        /// Still in doubt, until `until` at the earliest; `reason` for `status`.
        case waiting(until: Instant, reason: String)
        /// The new serial has read the same for the whole span: a change (`serial A → B`) to act on.
        case changed(String)
    }

    init(recorded: DeviceIdentity) {
        self.recorded = recorded
    }

    /// A read of the serial: the identity it gives, or nil with `problem` when the file cannot be read or
    /// fails the serial rule.
    mutating func read(_ identity: DeviceIdentity?, problem: String? = nil, at now: Instant) -> Verdict {
        guard let identity else {
            candidate = nil
            return .waiting(
                until: now.advanced(by: Self.span),
                reason: "the serial cannot be read (\(problem ?? "unreadable")); the pairing was made for serial "
                    + "\(recorded.serial): nothing is ordered until the serial reads")
        }
        if identity.isSameDevice(as: recorded) {
            candidate = nil
            return .same(identity)
        }
        if candidate?.identity != identity { candidate = (identity, now) }
        let since = candidate?.since ?? now
        let change = identity.changes(from: recorded)
        if now >= since.advanced(by: Self.span) { return .changed(change) }
        return .waiting(
            until: since.advanced(by: Self.span),
            reason: "the serial reads \(identity.serial), the pairing was made for \(recorded.serial): nothing is "
                + "ordered while it is re-read; the pairing is forgotten if it still reads \(identity.serial) after "
                + "\(Self.span.components.seconds / 60) minutes")
    }
}
