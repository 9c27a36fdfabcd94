import Foundation
import Testing

@testable import ReplenishAgent

/// What a test asks the emulator (its admin endpoints: faults, stats, arrivals, events) and the agent's own
/// reports (`status --json`, `orders --json`).
extension Harness {
    /// The emulator's next `count` answers to requests whose path starts with `path` get `fault` (a JSON
    /// object: `{"kind":"status","status":503}`, `{"kind":"drop"}`, `{"kind":"delay","seconds":40}`, …).
    func injectFault(_ emulator: String, path: String, count: Int, _ fault: String) throws {
        _ = try self.emulator(
            emulator, .post, "/admin/faults", body: #"{"path":"\#(path)","count":\#(count),"fault":\#(fault)}"#)
    }

    func emulator(
        _ base: String, _ method: HTTPRequest.Method, _ path: String, body: String? = nil,
        caFile: String? = nil
    ) throws -> [String: Any] {
        let response = try CurlEasy(options: .init(maximumResponseBytes: 64 << 20, caFile: caFile)).perform(
            HTTPRequest(
                method: method, url: base + path, headers: body == nil ? [] : [("Content-Type", "application/json")],
                body: body.map { Array($0.utf8) }))
        return (try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? [:]
    }

    func stats(_ base: String) throws -> [String: Any] { try emulator(base, .get, "/admin/stats") }

    /// The requests the emulator received (`/admin/stats`' `arrivals`, oldest first), only those to `path` when
    /// it is given.
    func arrivals(_ base: String, path: String? = nil) throws -> [[String: Any]] {
        let all = try stats(base)["arrivals"] as? [[String: Any]] ?? []
        guard let path else { return all }
        return all.filter { $0["path"] as? String == path }
    }

    /// The emulator's replenish event log.
    func replenishEvents(_ base: String) throws -> [[String: Any]] {
        try emulator(base, .get, "/admin/events")["replenish"] as? [[String: Any]] ?? []
    }

    func slotStatus(config: String, _ slot: String) throws -> [String: Any] {
        (try statusJSON(config: config)["slots"] as? [String: [String: Any]])?[slot] ?? [:]
    }

    /// `replenish-agent orders --json`.
    func ordersJSON(config: String) throws -> [String: Any] {
        let result = try run("replenish-agent", ["orders", "--json", "--config", config])
        return (try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]) ?? [:]
    }

    func statusJSON(config: String) throws -> [String: Any] {
        let result = try run("replenish-agent", ["status", "--json", "--config", config])
        return (try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]) ?? [:]
    }
}
