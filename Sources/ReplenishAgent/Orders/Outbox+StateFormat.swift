/// `outbox.json`'s format version (see `StateFormat` for the rule). Version 1: `entries` of `slot`,
/// `pressedAt`, `attempts` and `parkedReason`.
extension Outbox: StateFormat {
    static let formatVersion = 1
}

extension StateStore<Outbox> {
    /// `outbox.json` of the state directory, on the outbox's own lane (`DiskLane.outbox`): a press's write never
    /// queues behind a write of another file. Its owner in the daemon is `DeliveryLoop`; the commands without the daemon
    /// (`cancel-test-orders`, `reset`, `deregister`) and `status` and `press` use the same store. A write under
    /// way at a stop is given up at the stop's bound (`StopBound`): a press not renamed by then is not taken
    /// (`press` says so), a mark or an answer not written is sent again after the restart.
    static func outbox(stateDirectory: String) -> Self {
        StateStore(path: OrderBook.path(stateDirectory: stateDirectory), lane: .outbox, boundedAtStop: true)
    }
}
