import Testing

@testable import ReplenishAgent

/// What a press means (`PressMeaning`), on values: the decision and the facts in, the actions out.
@Suite(.tags(.unit)) struct PressMeaningTests {
    typealias Decision = PressPolicy<ContinuousClock.Instant>.Decision

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
        // A sensor's order does not ask about an open order; a button's does not ask about the latch.
        #expect(PressMeaning.needs(Decision.orderFromSensor(slot: "t")) == .init(sensorLatch: true, subscription: true))
        #expect(PressMeaning.needs(Decision.order(slot: "s")) == .init(openOrder: true, subscription: true))
        #expect(PressMeaning.needs(Decision.armRepairing) == .init())
    }

    @Test func gesturesAcknowledgementsAndUnmappedInputs() {
        #expect(actions(.acknowledgeOnly(reason: "cooldown")) == [.signal(.acknowledged), .answer("cooldown")])
        #expect(actions(.cancelRepairing) == [.signal(.acknowledged), .answer("re-pairing cancelled")])
        #expect(actions(.confirmRepairing) == [.confirmRepairing])
        #expect(actions(.openPairingWindow) == [.openPairingWindow])
        #expect(actions(.unmapped) == [.refuse(.invalidInput, "input button is not mapped to a slot")])
        #expect(actions(.armRepairing).count == 1)
    }

    @Test func theOutboxsAnswerAndItsRefusal() {
        #expect(PressMeaning.accepted(.queued, slot: "s") == "order for slot s queued")
        #expect(
            PressMeaning.accepted(.coalesced, slot: "s") == "an order for slot s is already pending; press recorded")
        #expect(
            PressMeaning.refused(AgentError(.notPaired, "not paired"))
                == [.signal(.acknowledged), .refuse(.notPaired, "not paired")])
    }
}
