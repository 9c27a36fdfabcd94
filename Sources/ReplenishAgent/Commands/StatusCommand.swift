import ArgumentParser
import FoundationEssentials

/// `status [--json]`: the `StatusReport` (what the device knows, read from the state directory whether or not the
/// agent runs, and whether an agent runs: it holds the state directory's lock), as text or JSON. Never prints a
/// token.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show pairing, token expiry, pending orders and last results.")

    @OptionGroup var options: ConfigOption

    @OptionGroup var format: ReportFormat

    /// `B00EXAMPLE (2 count)`.
    static func describe(_ product: SubscriptionInfo.Product) -> String {
        let amount = product.quantity.map { quantity in
            let number = quantity == quantity.rounded() && abs(quantity) < 1e15 ? String(Int(quantity)) : "\(quantity)"
            return " (\(number)\(product.unit.map { " \($0)" } ?? ""))"
        }
        return product.asin + (amount ?? "")
    }

    func run() async throws {
        let config = try options.load()
        let report = StatusReport(
            config: config, now: POSIX.wallTime(), runningAgent: StateDirectory.runningAgent(config.stateDirectory),
            agentRun: StateDirectory.runningAgentRun(config.stateDirectory))
        if try format.printedAsJSON(report) { return }
        if let alexa = report.alexa {
            Self.printAlexa(alexa, report: report)
            return
        }
        Output.line("device \(report.serial) (phase \(report.phase)): \(report.pairingState)")
        if config.device.serialSource != .config { Output.line("serial from \(config.device.serialSource.describe)") }
        Output.line(
            report.running
                ? "agent: running\(report.pid.map { " (pid \($0))" } ?? "")" : "agent: not running")
        if !report.paired {
            if let linking = report.linking {
                Output.line("enter code \(linking.userCode) at \(linking.verificationURI) (until \(linking.expiresAt))")
            } else if report.pairingMode == AgentConfig.PairingMode.code.rawValue {
                Output.line("no code to enter yet: the running agent asks LWA for one")
            } else {
                Output.line(
                    report.pairingWindow.closesAt.map { "pairing window open until \($0)" }
                        ?? (report.running
                            ? "pairing window closed: a long press on the button opens it"
                            : "pairing window: opens when the agent starts"))
                if let dnsSD = report.dnsSD { Output.line("DNS-SD: \(dnsSD)") }
            }
        }
        if let expiresAt = report.accessTokenExpiresAt, let seconds = report.accessTokenExpiresInSeconds {
            Output.line("access token expires \(expiresAt) (\(seconds >= 0 ? "in \(seconds) s" : "expired"))")
        }
        if let wifiSetup = report.wifiSetup { Output.line("Wi-Fi setup: \(wifiSetup)") }
        Output.line("pending orders: \(report.pendingOrders), parked: \(report.parkedOrders)")
        for (slot, info) in report.slots.sorted(by: { $0.key < $1.key }) {
            var subscribed = info.subscribed.map { $0 ? "subscribed" : "not subscribed" } ?? "subscription unknown"
            if let products = info.products, !products.isEmpty {
                subscribed += " to " + products.map(Self.describe).joined(separator: ", ")
            }
            Output.line(
                "slot \(slot): \(subscribed); last result: \(info.lastResult ?? "none")\(info.pending ? "; order pending" : "")"
                    + (info.waitingFor.map { ", \($0)" } ?? "")
                    + (info.order.map { "; order \($0.status ?? "placed")\($0.open ? " (followed)" : "")" } ?? "")
            )
        }
        for problem in report.problems { Output.error(problem) }
    }
}

extension StatusCommand {
    /// The text form of program alexa: the claim, the reports, the cloud's last word.
    static func printAlexa(_ alexa: StatusReport.Alexa, report: StatusReport) {
        let claim =
            switch alexa.claimed {
            case true?: "claimed by a customer"
            case false?: "not claimed yet (the customer's app claims it with the label)"
            case nil: "claim not known yet"
            }
        Output.line("device \(report.serial) (phase \(report.phase)), program alexa, unit \(alexa.unit): \(claim)")
        Output.line(
            report.running
                ? "agent: running\(report.pid.map { " (pid \($0))" } ?? "")" : "agent: not running")
        if let wifiSetup = report.wifiSetup { Output.line("Wi-Fi setup: \(wifiSetup)") }
        Output.line("report in flight: \(alexa.reportInFlight.map { "number \($0), not yet acknowledged" } ?? "none")")
        for (slot, units) in alexa.usageNotYetReported.sorted(by: { $0.key < $1.key }) {
            Output.line("slot \(slot): \(SupplyReporter<ContinuousClock>.number(units)) used, not yet reported")
        }
        for (slot, level) in alexa.levels.sorted(by: { $0.key < $1.key }) {
            Output.line("slot \(slot): level \(SupplyReporter<ContinuousClock>.number(level))")
        }
        Output.line("last daily report: \(alexa.lastDailyReportAt ?? "none yet")")
        if let cloud = alexa.cloud { Output.line("cloud: \(cloud)") }
        for problem in report.problems { Output.error(problem) }
    }
}
