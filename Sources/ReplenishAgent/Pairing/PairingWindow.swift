/// When the pairing endpoints may be served. Pure: the events come from the daemon, the time from its
/// clock; `PairingWindowKeeper` opens and closes the port from it.
///
/// The window opens on an unpaired device at every start (a customer who could not pair power-cycles the
/// device), after a long press on an unpaired device, and when the pairing is lost (LWA answered
/// `invalid_grant`, or the customer confirmed re-pairing). It closes `length` after it (last) opened, or at
/// once when the device is paired. A paired device never has it open.
struct PairingWindow<Instant: InstantProtocol>: Sendable, Equatable where Instant.Duration == Duration {
    enum Event: Sendable, Equatable {
        /// The agent started; `paired` is what the token file said.
        case started(paired: Bool)
        /// A long press on an unpaired device.
        case longPress
        /// The tokens were wiped (`invalid_grant`, or re-pairing confirmed).
        case pairingLost
        /// New tokens are durable.
        case paired
    }

    let length: Duration
    private(set) var paired = false
    /// When the open window closes; nil while closed.
    private(set) var closesAt: Instant?

    init(length: Duration) { self.length = length }

    func isOpen(at now: Instant) -> Bool { closesAt.map { now < $0 } ?? false }

    /// Applies an event; returns whether the window is open afterwards.
    @discardableResult
    mutating func handle(_ event: Event, at now: Instant) -> Bool {
        switch event {
        case .started(let isPaired):
            paired = isPaired
            closesAt = isPaired ? nil : now.advanced(by: length)
        case .longPress:
            // A paired device's long press is the re-pairing confirmation (PressPolicy), not this.
            if !paired { closesAt = now.advanced(by: length) }
        case .pairingLost:
            paired = false
            closesAt = now.advanced(by: length)
        case .paired:
            paired = true
            closesAt = nil
        }
        return expire(at: now)
    }

    /// Closes the window once its time is up; returns whether it is still open.
    @discardableResult
    mutating func expire(at now: Instant) -> Bool {
        if let closesAt, now >= closesAt { self.closesAt = nil }
        return isOpen(at: now)
    }
}
