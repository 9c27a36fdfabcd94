import Foundation
import Testing

@testable import ReplenishAgent

/// What `status` says about a running agent (the state directory's lock) and the keys its JSON always carries.
@Suite(.tags(.unit)) struct StatusReportTests {
    /// A companion-mode config whose state directory exists (0700), loaded.
    private func config() throws -> AgentConfig { try ConfigTests.loadedConfig() }

    private func encoded(_ value: some Encodable) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: JSONEncoder().encode(value)) as? [String: Any] ?? [:]
    }

    @Test func statusSaysWhetherTheAgentRunsAndThatTheWindowOpensAtItsStart() throws {
        let config = try config()
        let stopped = StatusReport(config: config, now: 1_800_000_000, runningAgent: nil)
        #expect(!stopped.running && stopped.pid == nil)
        #expect(stopped.pairingState == "not paired; pairing window: opens when the agent starts")
        var json = try encoded(stopped)
        #expect(json["running"] as? Bool == false)
        #expect(json.keys.contains("pid") && json["pid"] is NSNull)

        let running = StatusReport(config: config, now: 1_800_000_000, runningAgent: 4242)
        #expect(running.running && running.pid == 4242)
        #expect(running.pairingState == "not paired; pairing window closed (a long press opens it)")
        json = try encoded(running)
        #expect(json["running"] as? Bool == true && json["pid"] as? Int == 4242)

        // A lock held by a process whose pid the file does not say: running, pid null.
        let unknown = StatusReport(config: config, now: 1_800_000_000, runningAgent: 0)
        #expect(unknown.running && unknown.pid == nil)
    }

    /// A slot DRS was never asked about: `subscribed` and `lastResult` are null, the other optionals left out.
    @Test func anUnknownSlotHasNullSubscribedAndLastResult() throws {
        let json = try encoded(StatusReport.Slot(subscribed: nil, lastResult: nil, pending: false))
        #expect(json.keys.sorted() == ["lastResult", "pending", "subscribed"])
        #expect(json["subscribed"] is NSNull && json["lastResult"] is NSNull)
        let known = try encoded(
            StatusReport.Slot(subscribed: true, lastResult: "TEST_ORDER_PLACED", pending: true))
        #expect(known["subscribed"] as? Bool == true && known["lastResult"] as? String == "TEST_ORDER_PLACED")
    }

    @Test func anOrderNotYetAskedAboutHasNullStatusAndCheckedAt() throws {
        let order = StatusReport.Slot.Order(eventInstanceId: "e-1", open: true, status: nil, checkedAt: nil)
        let json = try encoded(order)
        #expect(json.keys.sorted() == ["checkedAt", "eventInstanceId", "open", "status"])
        #expect(json["status"] is NSNull && json["checkedAt"] is NSNull)
        let asked = try encoded(
            StatusReport.Slot.Order(
                eventInstanceId: "e-1", open: false, status: "Shipped", checkedAt: "2027-01-15T08:00:00Z"))
        #expect(asked["status"] as? String == "Shipped" && asked["checkedAt"] as? String == "2027-01-15T08:00:00Z")
    }
}
