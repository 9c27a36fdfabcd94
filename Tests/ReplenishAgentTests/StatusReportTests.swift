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

    /// A new run holds the lock before it has written its shown status: the stopped run's file (its window and
    /// its DNS-SD advertisement) is not shown as the new run's. Found in a clean-clone run: `status` said
    /// "advertised" for an agent that had not started its pairing yet.
    @Test func aStoppedRunsShownStatusIsNotTheRunningAgents() async throws {
        let config = try config()
        let (stopped, running) = (BootIdentity.randomId(), BootIdentity.randomId())
        let shown = ShownStatusBook(runtimeDirectory: config.runtimeDirectory, run: stopped, logger: .init(label: "t"))
        await shown.recordPairingWindow(closesAt: 1_800_000_600)
        await shown.recordAdvertisement("advertised as _replenish._tcp on port 8642")
        let now = 1_800_000_000.0
        let own = StatusReport(config: config, now: now, runningAgent: 4242, agentRun: stopped)
        #expect(own.pairingWindow.open && own.dnsSD == "advertised as _replenish._tcp on port 8642")
        let other = StatusReport(config: config, now: now, runningAgent: 4243, agentRun: running)
        #expect(!other.pairingWindow.open && other.dnsSD == nil)
        #expect(other.pairingState == "not paired; pairing window closed (a long press opens it)")
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
