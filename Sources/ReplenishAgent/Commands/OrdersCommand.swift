import ArgumentParser
import FoundationEssentials

/// `orders [--json]`: presses waiting to be sent, then the device's recent orders (newest first) with their
/// state as DRS last said, read from the state directory (works whether or not the agent runs, and writes
/// nothing).
struct OrdersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "orders", abstract: "Show queued presses and the open and recent orders with their state.")

    @OptionGroup var options: ConfigOption

    @OptionGroup var format: ReportFormat

    struct Report: Encodable {
        struct Queued: Encodable {
            var slot: String
            var presses: Int
            var firstPressAt: String?
            /// Why DRS refused it (a parked press waits for the next press of that slot); absent while pending.
            var parkedReason: String?
        }

        struct Order: Encodable {
            var slot: String
            var detailCode: String
            var eventInstanceId: String?
            var answeredAt: String
            var open: Bool
            var status: String?
            var checkedAt: String?
            var pressesWhileOpen: Int
            /// A press dropped without being sent (`NOT_SENT`): why.
            var droppedReason: String?
        }

        var queued: [Queued]
        /// Newest first.
        var orders: [Order]
        var problems: [String]
    }

    static func report(config: AgentConfig) -> Report {
        var problems: [String] = []
        let outbox = StatusReport.readOutbox(config: config, &problems)
        let queued = outbox.entries.map {
            Report.Queued(
                slot: $0.slot, presses: $0.pressedAt.count, firstPressAt: $0.pressedAt.first.map(ISO8601.format),
                parkedReason: $0.parkedReason)
        }
        let orders = (outbox.orders ?? []).reversed().map {
            Report.Order(
                slot: $0.slot, detailCode: $0.detailCode, eventInstanceId: $0.eventInstanceId,
                answeredAt: ISO8601.format($0.answeredAt), open: $0.open, status: $0.status,
                checkedAt: $0.checkedAt.map(ISO8601.format), pressesWhileOpen: $0.pressesWhileOpen ?? 0,
                droppedReason: $0.droppedReason)
        }
        return Report(queued: queued, orders: orders, problems: problems)
    }

    func run() async throws {
        let config = try options.load()
        let report = Self.report(config: config)
        if try format.printedAsJSON(report) { return }
        if report.queued.isEmpty { Output.line("no presses waiting to be sent") }
        for entry in report.queued {
            let state = entry.parkedReason.map { "parked: \($0); press again to retry" } ?? "waiting to be sent"
            Output.line("slot \(entry.slot): \(entry.presses) press(es) since \(entry.firstPressAt ?? "?"), \(state)")
        }
        if report.orders.isEmpty { Output.line("no orders yet") }
        for order in report.orders {
            var line = "\(order.answeredAt) slot \(order.slot): \(order.detailCode)"
            if let reason = order.droppedReason { line += " (a queued press dropped, never sent: \(reason))" }
            if let status = order.status { line += ", \(status)" }
            if let checked = order.checkedAt { line += " (as of \(checked))" }
            line += order.open ? ", open" : ""
            if order.pressesWhileOpen > 0 { line += "; pressed \(order.pressesWhileOpen) more time(s) while open" }
            Output.line(line)
        }
        for problem in report.problems { Output.error(problem) }
    }
}
