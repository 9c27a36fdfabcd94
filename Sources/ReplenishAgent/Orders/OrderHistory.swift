/// One answered replenish call, kept for `replenish-agent orders`: the newest `Outbox.orderHistoryLimit`
/// of them live in `outbox.json`, newest last.
struct OrderRecord: Codable, Sendable, Equatable {
    var slot: String
    /// DRS's answer: `STANDARD_ORDER_PLACED`, `TEST_ORDER_PLACED` or `ORDER_INPROGRESS`.
    var detailCode: String
    var eventInstanceId: String?
    /// When DRS answered (wall-clock seconds).
    var answeredAt: Double
    /// Still followed with `getOrderInfo` (`OrderTracker`): not shipped, delivered or cancelled yet.
    var open: Bool
    /// DRS's word for the order's state (`Processing`, `Shipped`, …), nil until asked.
    var status: String?
    var checkedAt: Double?
    /// Presses of the slot's button while this order was open: recorded and shown, not sent (DRS would answer
    /// `ORDER_INPROGRESS`).
    var pressesWhileOpen: Int?
    var lastPressWhileOpenAt: Double?
    /// A queued press that was dropped without being sent (`notSent`): why (the device left the customer's
    /// account: a reset, an identity change). Its `answeredAt` is when it was dropped.
    var droppedReason: String? = nil

    /// The `detailCode` of a press dropped without being sent (`droppedReason` says why).
    static let notSent = "NOT_SENT"
}

/// How the order facts change as orders are followed up, pressed again while open, refused and cancelled (an
/// acknowledged press is `Outbox.recordAnswer`). Pure: the intent methods of `OrderBook` call them, tests call
/// them on a value.
extension Outbox {
    static let orderHistoryLimit = 20

    /// `getOrderInfo` said `status` of the slot's order `id`. A newer order that replaced it meanwhile is left
    /// to its own follow-up.
    mutating func recordFollowUp(slot: String, eventInstanceId id: String, status: String, open: Bool, at time: Double)
    {
        guard slots[slot]?.lastEventInstanceId == id else { return }
        slots[slot, default: .init()].orderStatus = status
        slots[slot, default: .init()].orderCheckedAt = time
        slots[slot, default: .init()].orderOpen = open
        if var history = orders, let index = history.lastIndex(where: { $0.eventInstanceId == id }) {
            history[index].status = status
            history[index].checkedAt = time
            history[index].open = open
            orders = history
        }
    }

    /// The slot's order, while DRS has not said it is final.
    func openOrder(slot: String) -> (eventInstanceId: String, status: String?)? {
        guard let known = slots[slot], known.orderOpen == true, let id = known.lastEventInstanceId else { return nil }
        return (id, known.orderStatus)
    }

    /// A press for a slot whose order is still open: counted on that order, not sent.
    mutating func recordPressWhileOpen(slot: String, at time: Double) {
        guard let id = slots[slot]?.lastEventInstanceId, var history = orders,
            let index = history.lastIndex(where: { $0.eventInstanceId == id })
        else { return }
        // Saturated: the count comes from the status file, which a hand edit could set to Int.max.
        let presses = max(history[index].pressesWhileOpen ?? 0, 0)
        history[index].pressesWhileOpen = presses < Int.max ? presses + 1 : presses
        history[index].lastPressWhileOpenAt = time
        orders = history
    }

    /// DRS cancelled the test orders of `cancelled` slots: their open orders are closed as `Cancelled`.
    mutating func recordTestOrdersCancelled(slots cancelled: [String], at time: Double) {
        for slot in cancelled {
            guard let (id, _) = openOrder(slot: slot) else { continue }
            recordFollowUp(slot: slot, eventInstanceId: id, status: "Cancelled", open: false, at: time)
        }
    }

    /// DRS refused the slot's order for a reason retrying cannot fix (`reason`).
    mutating func recordRefusal(slot: String, reason: String, at time: Double) {
        slots[slot, default: .init()].lastResult = reason
        slots[slot, default: .init()].lastResultAt = time
    }

    /// The device left the customer's account (`deregister`, an identity change: `reason`): its queued presses
    /// go, each one still to send recorded in the history as not sent, with the reason (returned: the slots);
    /// what DRS said of its orders no longer holds; the order history stays for the owner to read, with
    /// nothing left open.
    @discardableResult
    mutating func forgetAccount(reason: String, at time: Double) -> [String] {
        let dropped = pending
        if !dropped.isEmpty {
            let history =
                (orders ?? [])
                + dropped.map {
                    // One whose last call's answer never came may have been placed: the record says so.
                    let unknown =
                        $0.unansweredSince != nil ? " (a call was sent, its answer unknown: DRS may have it)" : ""
                    return OrderRecord(
                        slot: $0.slot, detailCode: OrderRecord.notSent, eventInstanceId: nil, answeredAt: time,
                        open: false, droppedReason: reason + unknown)
                }
            orders = Array(history.suffix(Self.orderHistoryLimit))
        }
        dropEntries()
        for slot in slots.keys {
            slots[slot]?.orderOpen = nil
            slots[slot]?.sensorOrderedWhileLow = nil
        }
        if let history = orders {
            orders = history.map {
                var order = $0
                order.open = false
                return order
            }
        }
        return dropped.map(\.slot)
    }
}
