import Synchronization
import Testing

@testable import ReplenishAgent

/// `PressHandler` with one double of its owners and effects: which facts a press asks for (each once), which
/// actions it carries out, in which order, and what it answers (issue 42, point 2).
@Suite(.tags(.unit)) struct PressHandlerTests {
    /// Records every call, in one list; answers from what the test set.
    final class RecordingEffects: PressEffects, PressOutbox, PressBook, OpenOrderCheck, SubscriptionCheck {
        struct Script {
            var paired = true
            var latched = false
            var openOrder: PressMeaning.OpenOrder?
            var allowed = true
            var acceptance: Result<OrderBook.Acceptance, AgentError> = .success(
                .init(kind: .queued, consumedAt: [1_000], replacedWaiting: false))
            var refillFails = false
        }
        let script: Mutex<Script>
        let calls = Mutex<[String]>([])

        init(_ script: Script = Script()) { self.script = Mutex(script) }

        private func record(_ call: String) { calls.withLock { $0.append(call) } }

        func isPaired() async -> Bool {
            record("isPaired")
            return script.withLock { $0.paired }
        }
        func sensorOrderedWhileLow(_ slot: String) async -> Bool {
            record("sensorOrderedWhileLow \(slot)")
            return script.withLock { $0.latched }
        }
        func recheck(slot: String) async -> PressMeaning.OpenOrder? {
            record("recheck \(slot)")
            return script.withLock { $0.openOrder }
        }
        func allowsPress(slot: String) async -> Bool {
            record("allowsPress \(slot)")
            return script.withLock { $0.allowed }
        }
        func accept(slot: String, fromSensor: Bool) async throws(AgentError) -> OrderBook.Acceptance {
            record("accept \(slot) fromSensor=\(fromSensor)")
            return try script.withLock { $0.acceptance }.get()
        }
        func recordRefill(slot: String) async throws(AgentError) {
            record("recordRefill \(slot)")
            if script.withLock({ $0.refillFails }) { throw AgentError(.storage, "disk full") }
        }
        func recordPressWhileOpen(slot: String) async throws(AgentError) { record("recordPressWhileOpen \(slot)") }
        func reportSlotStatus(slot: String, report: SlotStatusReport) async {
            record("reportSlotStatus \(slot) remaining=\(report.remaining) original=\(report.original)")
        }
        func factoryReset() async -> Result<String, AgentError> {
            record("factoryReset")
            return .success("wiped")
        }
        func openPairingWindow() async -> String {
            record("openPairingWindow")
            return "pairing window open"
        }
        func signal(_ signal: PressMeaning.Signal) {
            if case .repairingArmed = signal { return }
            record("signal \(signal)")
        }
    }

    let clock = ManualClock()

    func handler(_ effects: RecordingEffects, quantity: Double? = nil) throws -> PressHandler<ManualClock> {
        var config = try ConfigTests.loadedConfig()
        config.buttons = [
            .init(input: "button", slot: "slot-1", cooldownSeconds: 60, quantity: quantity, remainingWhenLow: 2),
            .init(input: "sensor", slot: "slot-2", cooldownSeconds: 0),
        ]
        return PressHandler(
            config: config, outbox: effects, book: effects, tracker: effects, subscriptions: effects, effects: effects,
            clock: clock, logger: .init(label: "test"))
    }

    @Test func aShortPressAsksEachFactOnceAndOrders() async throws {
        let effects = RecordingEffects()
        let answer = try await handler(effects).handle(ButtonPress(input: "button", kind: .short))
        #expect(try answer.get() == "order for slot slot-1 queued")
        // No "is it paired?" for a short press: the accept is where an order's pairing is checked.
        #expect(
            effects.calls.withLock { $0 } == [
                "recheck slot-1", "allowsPress slot-1", "accept slot-1 fromSensor=false",
            ])
    }

    @Test func aButtonWithQuantitiesReportsTheSlotsStatusAfterTheAcceptFromWhatTheAcceptReturned() async throws {
        let effects = RecordingEffects()
        _ = try await handler(effects, quantity: 10).handle(ButtonPress(input: "button", kind: .short))
        #expect(
            effects.calls.withLock { $0 }.suffix(2) == [
                "accept slot-1 fromSensor=false", "reportSlotStatus slot-1 remaining=2.0 original=10.0",
            ])
        // A press counted on a pending order says nothing new of the slot's contents: no report.
        let coalesced = RecordingEffects(
            .init(
                acceptance: .success(.init(kind: .coalesced, consumedAt: [1], replacedWaiting: false)))
        )
        let answer = try await handler(coalesced, quantity: 10).handle(ButtonPress(input: "button", kind: .short))
        #expect(try answer.get() == "an order for slot slot-1 is already pending; press recorded")
        #expect(!coalesced.calls.withLock { $0 }.contains { $0.hasPrefix("reportSlotStatus") })
    }

    @Test func aPressWhileTheOrderIsOpenIsRecordedNotOrdered() async throws {
        let effects = RecordingEffects(.init(openOrder: .init(state: "Processing")))
        let answer = try await handler(effects).handle(ButtonPress(input: "button", kind: .short))
        #expect(try answer.get().contains("already ordered (Processing"))
        #expect(
            effects.calls.withLock { $0 } == [
                "recheck slot-1", "recordPressWhileOpen slot-1", "signal alreadyOrdered",
            ])
    }

    @Test func aRefusedAcceptIsAcknowledgedAndAnsweredWithWhy() async throws {
        let effects = RecordingEffects(.init(acceptance: .failure(AgentError(.notPaired, "not paired"))))
        let answer = try await handler(effects).handle(ButtonPress(input: "button", kind: .short))
        guard case .failure(let error) = answer else {
            Issue.record("a refused accept must fail the press")
            return
        }
        #expect(error.code == .notPaired)
        #expect(effects.calls.withLock { $0 }.last == "signal acknowledged")
    }

    @Test func theCooldownAcknowledgesWithoutAskingAnything() async throws {
        let effects = RecordingEffects()
        let presses = try handler(effects)
        _ = await presses.handle(ButtonPress(input: "button", kind: .short))
        effects.calls.withLock { $0 = [] }
        clock.advance(by: .seconds(30))
        let answer = await presses.handle(ButtonPress(input: "button", kind: .short))
        #expect(try answer.get().contains("cooldown"))
        #expect(effects.calls.withLock { $0 } == ["signal acknowledged"])
    }

    @Test func aSensorLowReportsEvenWhenLatchedNotAndARefillThatCannotBeWrittenFails() async throws {
        let effects = RecordingEffects()
        let presses = try handler(effects)
        _ = await presses.handle(ButtonPress(input: "sensor", kind: .low))
        #expect(
            effects.calls.withLock { $0 } == [
                "sensorOrderedWhileLow slot-2", "allowsPress slot-2", "accept slot-2 fromSensor=true",
                "reportSlotStatus slot-2 remaining=0.0 original=1.0",
            ])
        let latched = RecordingEffects(.init(latched: true))
        let answer = try await handler(latched).handle(ButtonPress(input: "sensor", kind: .low))
        #expect(try answer.get() == "slot slot-2 was already ordered while low; waiting for a refill")
        #expect(latched.calls.withLock { $0 } == ["sensorOrderedWhileLow slot-2"])
        let full = RecordingEffects(.init(refillFails: true))
        let refill = try await handler(full).handle(ButtonPress(input: "sensor", kind: .refilled))
        guard case .failure(let error) = refill else {
            Issue.record("a refill that is not written must fail")
            return
        }
        #expect(error.code == .storage)
    }

    @Test func aLongPressAsksThePairingOnceAndOpensTheWindowWhenUnpaired() async throws {
        let effects = RecordingEffects(.init(paired: false))
        let answer = try await handler(effects).handle(ButtonPress(input: "button", kind: .long))
        #expect(try answer.get() == "pairing window open")
        #expect(effects.calls.withLock { $0 } == ["isPaired", "openPairingWindow"])
        // Paired: the long press arms re-pairing, and asks nothing of the order side.
        let paired = RecordingEffects()
        let armed = try await handler(paired).handle(ButtonPress(input: "button", kind: .long))
        #expect(try armed.get().hasPrefix("re-pairing armed"))
        #expect(paired.calls.withLock { $0 } == ["isPaired"])
    }
}

/// Only the followers that show "refreshing" hear it; the delivery loop hears only what lets orders go
/// (`Broadcast.subscribe(where:)`, `TokenEvent`'s predicates).
@Suite(.tags(.unit)) struct TokenEventRoutingTests {
    @Test func aSubscriberHearsOnlyWhatItWants() async {
        let events = Broadcast<TokenEvent>()
        let orders = events.subscribe { $0.letsOrdersGo }
        let lights = events.subscribe { !$0.isRefreshStarting }
        let status = events.subscribe()
        let published: [TokenEvent] = [
            .changed(.refreshing(expiresAt: 1)), .changed(.fresh(expiresAt: 2)),
            .changed(.retryWait(expiresAt: 2, reason: "LWA down")), .paired, .pairingLost,
        ]
        for event in published { events.publish(event) }
        events.finish()
        func all(_ stream: AsyncStream<TokenEvent>) async -> [TokenEvent] {
            await stream.reduce(into: []) { $0.append($1) }
        }
        #expect(await all(orders) == [.changed(.fresh(expiresAt: 2)), .paired])
        #expect(await all(lights) == Array(published.dropFirst()))
        #expect(await all(status) == published)
    }
}
