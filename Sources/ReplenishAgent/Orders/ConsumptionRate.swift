/// The slot-status report a consumption makes (a press that ordered, or a level sensor that read low): the
/// slot's own quantities from the config (`buttons[].quantity`, what a refill holds, and
/// `buttons[].remainingWhenLow`, what is left when the button is pressed or the sensor reads low), and an
/// expected-replenishment date from the consumption rate the device has observed. Pure.
enum ConsumptionRate {
    /// How many consumption times a slot keeps (`SubscriptionRecord.Slot.consumedAt`).
    static let historyLimit = 6
    /// The time a refill lasts before the device has seen two consumptions: a month.
    static let defaultInterval: Double = 30 * 86400
    /// Intervals shorter than this are the same consumption reported twice (a sensor flickering across its
    /// mark), not a refill used up: they are left out of the rate.
    static let shortestInterval: Double = 3600

    /// The mean time between the consumptions in `history` (oldest first), nil with fewer than two.
    static func meanInterval(_ history: [Double]) -> Double? {
        let intervals = zip(history.dropFirst(), history).map { $0 - $1 }.filter { $0 >= shortestInterval }
        guard !intervals.isEmpty else { return nil }
        return intervals.reduce(0, +) / Double(intervals.count)
    }

    /// The report for a consumption at the newest time of `history`: the slot next needs replenishing one
    /// observed interval later (a month while the rate is unknown). Without a configured quantity the unit is
    /// "one refill" (`remaining` 0 of 1), which is all a switch knows.
    static func report(history: [Double], quantity: Double?, remainingWhenLow: Double) -> SlotStatusReport? {
        guard let now = history.last else { return nil }
        let interval = meanInterval(history) ?? defaultInterval
        return SlotStatusReport(
            remaining: quantity == nil ? 0 : remainingWhenLow, original: quantity ?? 1, lastUse: now,
            expectedReplenishment: now + interval)
    }
}
