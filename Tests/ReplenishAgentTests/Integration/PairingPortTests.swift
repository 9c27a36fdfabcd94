import Foundation
import Testing

@testable import ReplenishAgent

/// The real agent's pairing port is reachable from the whole local network: no peer may hold it. Raw sockets
/// on loopback against the running binary; every wait is bounded.
@Suite(.serialized) struct PairingPortTests {
    @Test func theCapTheImmediate413AndTheIdleCloseKeepThePairingPortServing() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator()
        let pairingPort = try Harness.freePort()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: pairingPort)
        let agent = try harness.startAgent(config: config)
        let deviceInfo = {
            try CurlEasy(options: .init()).perform(
                HTTPRequest(
                    method: .get, url: "http://127.0.0.1:\(pairingPort)/provision/deviceInfo"))
        }
        try harness.waitUntil("the pairing endpoints") { (try? deviceInfo())?.status == 200 }

        // Eight peers that connect and say nothing fill the port: the next connection is closed unanswered.
        var silent = try (0..<8).map { _ in try RawConnection(port: pairingPort) }
        // Admitted, all eight: none is closed on it (the accept loop takes them in its own time).
        let stillOpen = silent.map { $0.receive(within: 0.25) == nil }
        #expect(stillOpen.allSatisfy { $0 }, "open: \(stillOpen)")
        #expect(throws: AgentError.self) { try deviceInfo() }
        // When they go, the port serves again.
        silent.removeAll()
        try harness.waitUntil("a freed connection slot", timeout: 10) { (try? deviceInfo())?.status == 200 }

        // A body over 64 KiB is answered 413 as soon as the cap is passed, before the rest is sent.
        let big = try RawConnection(port: pairingPort)
        big.send("POST /provision/companionInfo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
        big.send(String(repeating: "x", count: 70 * 1024))
        let answer = big.receive(within: 10)
        #expect(answer?.text.hasPrefix("HTTP/1.1 413") == true, "\(answer?.text ?? "no answer")")

        // A peer that stays silent is dropped after the 30 s idle timeout.
        let idle = try RawConnection(port: pairingPort)
        let started = Date()
        let closed = idle.receive(within: 45)
        #expect(closed?.closed == true)
        #expect(Date().timeIntervalSince(started) >= 25, "closed after \(Date().timeIntervalSince(started)) s")
        #expect(try deviceInfo().status == 200)

        // Idle means waiting for a request, not answering one: a simulated press held for 35 s (the control
        // socket has the same guards) still gets the agent's answer.
        let held = try harness.run(
            "replenish-agent", ["press", "button", "--hold", "35", "--config", config], timeout: 90)
        #expect(!(held.output + held.error).contains("curl"), "\(held.error)")
        #expect(agent.isRunning)
        harness.expectNoSecretsInAgentOutput()
    }
}
