import Foundation
import Testing

@testable import ReplenishAgent

/// What the owner commands decide before anyone is asked, and how DRS's and the control socket's inputs are
/// read: bad input gets a reason, never a crash.
@Suite(.tags(.unit)) struct OwnerCommandRulesTests {
    @Test func cancellingTestOrdersIsForTestAndCertificationDevicesAndTheirOwnSlots() {
        #expect(TestOrders.refusal(phase: .production, slot: nil, slots: ["a"])?.contains("production phase") == true)
        #expect(TestOrders.refusal(phase: .test, slot: nil, slots: ["a"]) == nil)
        #expect(TestOrders.refusal(phase: .certification, slot: "a", slots: ["a"]) == nil)
        #expect(TestOrders.refusal(phase: .test, slot: "b", slots: ["a"])?.contains("slot \"b\"") == true)
    }

    @Test func theCancelAnswerIsReadStrictlyAndMadePrintable() throws {
        let statuses = try TestOrders.slotStatuses(
            Array(#"{"slotOrderStatuses":[{"slotId":"a","orderStatus":"NO_ORDER_IN_PROGRESS\u001b[31m"}]}"#.utf8))
        #expect(statuses == [.init(slotId: "a", orderStatus: "NO_ORDER_IN_PROGRESS31m")])
        for body in ["", "{}", #"{"slotOrderStatuses":{}}"#, #"{"slotOrderStatuses":[{"slotId":1}]}"#] {
            #expect(throws: AgentError.self) { try TestOrders.slotStatuses(Array(body.utf8)) }
        }
        #expect(TestOrders.printable("bad\u{7}\u{1b}\n message" + String(repeating: "x", count: 300)).count == 200)
    }

    @Test func theControlSocketNamesOwnerCommandsAndRefusesABadBody() throws {
        #expect(try ControlServer.ownerCommand(path: "/reset", body: [])?.get() == .reset)
        #expect(try ControlServer.ownerCommand(path: "/deregister", body: [])?.get() == .deregister)
        #expect(
            try ControlServer.ownerCommand(path: "/cancel-test-orders", body: Array(#"{"slot":"a"}"#.utf8))?.get()
                == .cancelTestOrders(slot: "a"))
        #expect(
            try ControlServer.ownerCommand(path: "/cancel-test-orders", body: Array("{}".utf8))?.get()
                == .cancelTestOrders(slot: nil))
        guard case .failure(let error) = ControlServer.ownerCommand(path: "/cancel-test-orders", body: Array("[".utf8))
        else {
            Issue.record("a bad body must be refused")
            return
        }
        #expect(error.code == .invalidInput)
        #expect(ControlServer.ownerCommand(path: "/press", body: []) == nil)
    }
}
