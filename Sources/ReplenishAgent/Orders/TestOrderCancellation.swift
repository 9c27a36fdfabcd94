import FoundationEssentials
import Logging

/// `replenish-agent cancel-test-orders [--slot ID]`: cancels the device's test orders at DRS, so a test or
/// certification run can order the same slot again, and records the slots' orders as cancelled. Refused in
/// the production phase, where orders are real and DRS has no test orders. Carried out by the daemon when it
/// runs (asked over the control socket), else by the command under the state directory's lock.
struct TestOrderCancellation<C: Clock>: Sendable where C.Duration == Duration {
    let phase: AgentConfig.Phase
    let slots: [String]
    let tokens: TokenManager<C>
    let drs: DRSSession
    /// Records the cancelled slots' orders as cancelled (`OrderBook.recordTestOrdersCancelled` in the daemon,
    /// `CancelTestOrdersCommand.recordOffline` without it).
    let record: @Sendable (_ slots: [String], _ at: Double) async throws(AgentError) -> Void
    let wallTime: @Sendable () -> Double

    func perform(slot: String?) async -> Result<String, AgentError> {
        if let refusal = TestOrders.refusal(phase: phase, slot: slot, slots: slots) {
            return .failure(AgentError(.invalidInput, refusal))
        }
        do throws(AgentError) {
            guard await tokens.isPaired else {
                throw AgentError(.notPaired, "the device is not paired: it has no test orders")
            }
            let answer = try await drs.send(.cancelTestOrders(slot: slot))
            guard answer.status == 200 else {
                let message = (try? JSONDecoder().decode(DRSMessage.self, from: Data(answer.body)))?.message
                throw AgentError(
                    .server,
                    "DRS answered \(answer.status)\(message.map { ": " + TestOrders.printable($0) } ?? "")")
            }
            let statuses = try TestOrders.slotStatuses(answer.body)
            let at = wallTime()
            let cancelled = slot.map { [$0] } ?? slots
            try await record(cancelled, at)
            let described = statuses.map { "\($0.slotId): \($0.orderStatus)" }.joined(separator: ", ")
            return .success("test orders cancelled (\(described.isEmpty ? "DRS named no slot" : described))")
        } catch {
            return .failure(error)
        }
    }
}

/// The rules and answers of `cancel-test-orders` that need no state (for the command before it asks anyone).
enum TestOrders {
    /// Why the command is refused before anything is asked, nil when it may go on.
    static func refusal(phase: AgentConfig.Phase, slot: String?, slots: [String]) -> String? {
        if phase == .production {
            return
                "refused: the device is in the production phase (device.phase), where orders are real; only a device in the test phase places test orders to cancel"
        }
        if let slot, !slots.contains(slot) {
            return "the config maps no button to slot \"\(slot)\" (its slots: \(slots.joined(separator: ", ")))"
        }
        return nil
    }

    /// DRS's message, cut to printable ASCII and 200 characters (it is shown to the owner as is).
    static func printable(_ text: String) -> String {
        String(
            text.unicodeScalars.filter { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F }.prefix(200).map(
                Character.init))
    }

    struct SlotOrderStatus: Decodable, Equatable {
        var slotId: String
        var orderStatus: String
    }

    /// The `slotOrderStatuses` of DRS's answer, each value made printable.
    static func slotStatuses(_ body: [UInt8]) throws(AgentError) -> [SlotOrderStatus] {
        struct Answer: Decodable { var slotOrderStatuses: [SlotOrderStatus] }
        guard let answer = try? JSONDecoder().decode(Answer.self, from: Data(body)) else {
            throw AgentError(.server, "the cancel-test-orders answer is unreadable")
        }
        return answer.slotOrderStatuses.prefix(100).map {
            SlotOrderStatus(slotId: LWAClient.sanitize($0.slotId), orderStatus: LWAClient.sanitize($0.orderStatus))
        }
    }
}
