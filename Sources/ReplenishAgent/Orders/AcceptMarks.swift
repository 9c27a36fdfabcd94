/// The entries whose "sent, answer unknown" mark was written with the press (`DeliveryLoop.accept`), before their call
/// left, each as it was before: what the mark goes back to when the call does not leave after all. In memory
/// only: after a restart a mark on disk is a call whose answer is unknown.
struct AcceptMarks: Sendable {
    private var before: [String: Outbox.Entry] = [:]

    func has(_ slot: String) -> Bool { before[slot] != nil }

    /// The press of `slot` was written with its mark; `entry` is the entry as it was before the press.
    mutating func remember(_ slot: String, before entry: Outbox.Entry) { before[slot] = entry }

    /// The remembered entry of `slot`, now to be tried (or its mark taken back), and forgotten.
    mutating func take(_ slot: String) -> Outbox.Entry? { before.removeValue(forKey: slot) }

    /// A new entry for `slot` (the first press, or one replacing a parked or waiting entry): what was remembered
    /// of an older entry is not this one's.
    mutating func forget(_ slot: String) { before[slot] = nil }

    mutating func forgetAll() { before.removeAll() }

    /// A mark is kept only while its entry still waits to be tried with it: an entry completed, parked or
    /// replaced before its call was tried takes its remembered state with it.
    mutating func keepOnlyWaiting(in outbox: Outbox) {
        before = before.filter { slot, _ in
            outbox.entry(for: slot).map { !$0.isParked && $0.unansweredSince != nil } ?? false
        }
    }
}
