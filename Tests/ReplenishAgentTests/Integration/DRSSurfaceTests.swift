import Foundation
import Testing

@testable import ReplenishAgent

/// The DRS calls besides replenish, against the emulator: subscriptions @2.0 with their products, and a
/// button that works as soon as the customer subscribes.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct DRSSurfaceTests {
    @Test func aSlotSubscribedAfterTheDailyCheckOrdersAtTheNextPress() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--slots", "slot-1,slot-2"])
        _ = try harness.emulator(emulator, .post, "/admin/subscription/slot-2?subscribed=false")
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(
            emulator: emulator, pairingPort: pairingPort, slots: ["slot-1", "slot-2"])
        try harness.startAgent(config: config)
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("the first subscription check") {
            let slots = try harness.statusJSON(config: config)["slots"] as? [String: [String: Any]]
            return slots?["slot-1"]?["subscribed"] as? Bool == true && slots?["slot-2"]?["subscribed"] as? Bool == false
        }
        // @2.0: what each slot is subscribed to is shown.
        let slot1 = try harness.slotStatus(config: config, "slot-1")
        let products = try #require(slot1["products"] as? [[String: Any]], "\(slot1)")
        #expect(products.first?["asin"] is String)
        #expect(try harness.run("replenish-agent", ["status", "--config", config]).output.contains("subscribed to "))

        // The customer subscribes slot 2 in the app; the next press asks DRS again and orders.
        let callsBefore = try harness.stats(emulator)["subscriptionInfoCalls"] as? Int ?? 0
        _ = try harness.emulator(emulator, .post, "/admin/subscription/slot-2?subscribed=true")
        let press = try harness.run("replenish-agent", ["press", "button2", "--config", config])
        #expect(press.status == 0, "\(press.output)\(press.error)")
        #expect(try harness.stats(emulator)["subscriptionInfoCalls"] as? Int == callsBefore + 1)
        try harness.waitUntil("the order for slot 2") {
            (try harness.stats(emulator)["ordersPlaced"] as? [String: Int])?["slot-2"] == 1
        }
        #expect(try harness.slotStatus(config: config, "slot-2")["subscribed"] as? Bool == true)
        harness.expectNoSecretsInAgentOutput()
    }
}

extension DRSSurfaceTests {
    @Test func aButtonWithQuantitiesReportsSlotStatusInItsOwnUnits() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--slots", "slot-1"])
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(
            emulator: emulator, pairingPort: pairingPort, buttonExtra: #","quantity":12,"remainingWhenLow":2"#)
        try harness.startAgent(config: config)
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("the first subscription check") {
            try harness.slotStatus(config: config, "slot-1")["subscribed"] as? Bool == true
        }
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the slot status") { try harness.stats(emulator)["slotStatusCalls"] as? Int == 1 }
        let reports = try #require(harness.stats(emulator)["lastSlotStatus"] as? [String: [String: Any]])
        let report = try #require(reports["slot-1"], "\(reports)")
        #expect(report["originalQuantityInUnit"] as? Double == 12)
        #expect(report["remainingQuantityInUnit"] as? Double == 2)
        // What the household holds beyond the slot's unit is not the device's to know (#29.10): left out.
        #expect(report["totalQuantityOnHand"] == nil)
        // Every request names the build (#29.10), so a service operator can tell builds apart.
        // (The companion app's own authorization request, `/ap/oa`, is not the device's.)
        let arrivals = (try harness.stats(emulator)["arrivals"] as? [[String: Any]] ?? []).filter {
            ($0["path"] as? String)?.hasPrefix("/ap/oa") == false
        }
        let agents = Set(arrivals.compactMap { $0["userAgent"] as? String })
        #expect(!arrivals.isEmpty && agents == [CurlEasy.userAgent], "\(agents)")
        #expect(CurlEasy.userAgent.hasPrefix("replenish-agent/0."))
        // One consumption seen: the rate is unknown, so the expected date is a month after it.
        let expected = try #require(report["expectedReplenishmentDate"] as? String)
        let lastUse = try #require(report["lastUseDate"] as? String)
        let dates = try [expected, lastUse].map { try Date($0, strategy: .iso8601) }
        #expect(abs(dates[0].timeIntervalSince(dates[1]) - 30 * 86400) < 1)
    }
}
