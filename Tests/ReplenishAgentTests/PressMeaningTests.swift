import Testing

@testable import ReplenishAgent

/// What a press means (`PressMeaning`), on values: the decision and the facts in, the actions out.
@Suite(.tags(.unit)) struct PressMeaningTests {
    typealias Decision = PressMeaning.Decision

    func actions(_ decision: Decision, _ facts: PressMeaning.Facts = .init()) -> [PressMeaning.Action] {
        PressMeaning.actions(for: decision, facts: facts, input: "button")
    }

    @Test func aButtonOrdersUnlessItsOrderIsStillOpenOrTheSlotIsNotSubscribed() {
        #expect(actions(.order(slot: "s")) == [.order(slot: "s", fromSensor: false)])
        #expect(
            actions(.order(slot: "s"), .init(openOrder: .init(state: "Processing")))
                == [
                    .recordPressWhileOpen(slot: "s", state: "Processing"), .signal(.alreadyOrdered),
                    .answer("slot s is already ordered (Processing, not yet shipped); press recorded, no new order"),
                ])
        #expect(
            actions(.order(slot: "s"), .init(subscribed: false))
                == [.signal(.acknowledged), .refuse(.accessDenied, "slot s is not subscribed")])
        // An open order wins over the subscription (the press is recorded on it, nothing is refused).
        #expect(
            actions(.order(slot: "s"), .init(openOrder: .init(state: nil), subscribed: false)).first
                == .recordPressWhileOpen(slot: "s", state: nil))
    }

    @Test func aLevelSensorOrdersOnceUntilARefill() {
        #expect(actions(.orderFromSensor(slot: "t")) == [.order(slot: "t", fromSensor: true)])
        #expect(
            actions(.orderFromSensor(slot: "t"), .init(sensorLatched: true))
                == [.answer("slot t was already ordered while low; waiting for a refill")])
        #expect(actions(.sensorRefilled(slot: "t")) == [.recordRefill(slot: "t"), .answer("slot t refilled")])
    }

    @Test func gesturesAcknowledgementsAndUnmappedInputs() {
        #expect(actions(.acknowledgeOnly(reason: "cooldown")) == [.signal(.acknowledged), .answer("cooldown")])
        #expect(actions(.cancelRepairing) == [.signal(.acknowledged), .answer("re-pairing cancelled")])
        #expect(actions(.confirmRepairing) == [.confirmRepairing])
        #expect(actions(.openPairingWindow) == [.openPairingWindow])
        #expect(actions(.unmapped) == [.refuse(.invalidInput, "input button is not mapped to a slot")])
        #expect(actions(.armRepairing).count == 1)
    }

    @Test func theOutboxsAnswerAndItsRefusal() throws {
        func accepted(_ kind: Outbox.Acceptance, fromSensor: Bool = false, quantity: Double? = nil)
            -> [PressMeaning.Action]
        {
            PressMeaning.accepted(
                .init(kind: kind, consumedAt: [100, 200], replacedWaiting: false), slot: "s",
                fromSensor: fromSensor, button: .init(input: "button", slot: "s", quantity: quantity))
        }
        #expect(accepted(.queued) == [.answer("order for slot s queued")])
        #expect(accepted(.coalesced) == [.answer("an order for slot s is already pending; press recorded")])
        // The slot's status is reported from the consumption the accept returned: for a sensor, or a button
        // whose slot has quantities, and only when the press says something new of the contents.
        let report = try #require(ConsumptionRate.report(history: [100, 200], quantity: 4, remainingWhenLow: 0))
        #expect(
            accepted(.queued, quantity: 4) == [
                .reportSlotStatus(slot: "s", report: report), .answer("order for slot s queued"),
            ])
        #expect(
            accepted(.coalesced, quantity: 4) == [.answer("an order for slot s is already pending; press recorded")])
        #expect(
            accepted(.coalesced, fromSensor: true).first.map { if case .reportSlotStatus = $0 { true } else { false } }
                == true)
        #expect(
            PressMeaning.refused(AgentError(.notPaired, "not paired"))
                == [.signal(.acknowledged), .refuse(.notPaired, "not paired")])
    }
}
