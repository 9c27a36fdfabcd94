/// The durable list of presses not yet acknowledged by DRS. Pure rules; `OrderService` persists it.
///
/// - At most one entry per slot: a press for a slot that already has one pending is coalesced into it (its
///   time is recorded), because DRS would answer the second with `ORDER_INPROGRESS` anyway.
/// - A parked entry (DRS refused it for a reason retrying cannot fix) stays visible until the customer presses
///   that slot's button again, which replaces it with a fresh pending entry.
/// - The size is bounded by the number of configured slots; the recorded press times of one entry by
///   `maximumPressTimes` (the oldest are dropped: they are only kept for the record).
struct Outbox: Codable, Sendable, Equatable {
    struct Entry: Codable, Sendable, Equatable {
        var slot: String
        /// Wall-clock times of the presses this entry stands for, oldest first.
        var pressedAt: [Double]
        var attempts: Int = 0
        var parkedReason: String?

        var isParked: Bool { parkedReason != nil }
    }

    enum Acceptance: Equatable, Sendable { case queued, coalesced }

    static let maximumPressTimes = 16

    var version = 1
    private(set) var entries: [Entry] = []

    var pending: [Entry] { entries.filter { !$0.isParked } }
    var parked: [Entry] { entries.filter(\.isParked) }

    func entry(for slot: String) -> Entry? { entries.first { $0.slot == slot } }

    mutating func accept(slot: String, at time: Double) -> Acceptance {
        if let index = entries.firstIndex(where: { $0.slot == slot }) {
            if entries[index].isParked {
                entries[index] = Entry(slot: slot, pressedAt: [time])
                return .queued
            }
            entries[index].pressedAt.append(time)
            if entries[index].pressedAt.count > Self.maximumPressTimes {
                entries[index].pressedAt.removeFirst(entries[index].pressedAt.count - Self.maximumPressTimes)
            }
            return .coalesced
        }
        entries.append(Entry(slot: slot, pressedAt: [time]))
        return .queued
    }

    /// DRS acknowledged the slot's order: the entry is done.
    mutating func complete(slot: String) { entries.removeAll { $0.slot == slot } }

    mutating func recordAttempt(slot: String) {
        if let index = entries.firstIndex(where: { $0.slot == slot }) { entries[index].attempts += 1 }
    }

    mutating func park(slot: String, reason: String) {
        if let index = entries.firstIndex(where: { $0.slot == slot }) { entries[index].parkedReason = reason }
    }
}
