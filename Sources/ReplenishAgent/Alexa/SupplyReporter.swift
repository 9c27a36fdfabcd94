import FoundationEssentials
import Logging

/// The alexa program's one writer of `reports.json` and its delivery loop: a press or a level reading is written
/// before it is answered, and the loop sends what is not yet acknowledged to the maker's cloud (`CloudClient`),
/// at the times `ReportTimeline` says. A report is written before it is sent and resent unchanged until the
/// cloud acknowledges its sequence number: no press is lost to a power cut, a network down or a refused
/// certificate, and none is counted twice.
final actor SupplyReporter<C: Clock> where C.Duration == Duration {
    /// What `status` and the LED show of the reports.
    struct Shown: Sendable, Equatable {
        var claimed: Bool?
        /// Reports not yet acknowledged (one out, and changes not yet in one).
        var unreported: Bool
        /// Why the last call to the cloud failed; nil once one succeeds.
        var lastError: String?
    }

    static func path(stateDirectory: String) -> String { POSIX.join(stateDirectory, "reports.json") }

    private let unit: String
    private let sensors: [String: AgentConfig.SupplySensor]
    private let store: StateStore<ReportRecord>
    private let cloud: CloudClient
    private let clock: C
    /// The wall clock when it is trusted (else nil: no time goes into a report).
    private let wallTime: @Sendable () -> Double?
    private let logger: Logger
    private let waker = Waker()
    private var random: RandomSource
    private var record: ReportRecord
    private var timeline: ReportTimeline<C.Instant>
    private var lastError: String?
    /// Each change of what `status` shows.
    let shown = Broadcast<Shown>()

    /// Loads `reports.json` (a new stream when there is none); a file that cannot be used is moved aside and
    /// `onCorrupt` told. Before the daemon's loop serves.
    init(
        unit: String, sensors: [String: AgentConfig.SupplySensor], store: StateStore<ReportRecord>, cloud: CloudClient,
        clock: C, wallTime: @escaping @Sendable () -> Double?, random: RandomSource = .system, logger: Logger,
        onCorrupt: (String) -> Void, loadingOn lane: borrowing DiskLane.Context
    ) throws(AgentError) {
        self.unit = unit
        self.sensors = sensors
        self.store = store
        self.cloud = cloud
        self.clock = clock
        self.wallTime = wallTime
        var random = random
        let loaded = try store.load(on: lane, onCorrupt: onCorrupt)
        record = loaded ?? ReportRecord(stream: ReportRecord.newStream(using: &random))
        self.random = random
        self.logger = logger
        let now = clock.now
        timeline = ReportTimeline(
            dailyAt: ReportTimeline.firstDaily(lastDailyAt: record.lastDailyAt, wallTime: wallTime(), now: now),
            claimed: record.claimed, at: now)
    }

    var current: Shown { Shown(claimed: record.claimed, unreported: record.hasUnreported, lastError: lastError) }

    /// A press of a usage slot: its units, durably, before the answer.
    func recordUsage(slot: String) async throws(AgentError) -> String {
        guard case .usage(let units)? = sensors[slot]?.kind else {
            throw AgentError(.invalidInput, "slot \(slot) has no usage sensor")
        }
        try await change { $0.recordUsage(slot: slot, units: units, at: wallTime()) }
        logger.info("usage recorded", metadata: ["alexa.slot": "\(slot)", "alexa.units": "\(units)"])
        return "\(Self.number(units)) used of \(slot): reported to the maker's cloud"
    }

    /// A level input of `slot` read low (`low`) or full: the level its config gives that reading, durably.
    func recordLevel(slot: String, low: Bool) async throws(AgentError) -> String {
        guard case .level(let measurement, let lowValue, let fullValue)? = sensors[slot]?.kind else {
            throw AgentError(.invalidInput, "slot \(slot) has no level sensor")
        }
        let value = low ? lowValue : fullValue
        try await change { $0.recordLevel(slot: slot, value: value, at: wallTime()) }
        let unit = measurement.unit.map { " \($0)" } ?? (measurement == .percentage ? " %" : "")
        let shown = Self.number(value) + unit
        logger.info("level recorded", metadata: ["alexa.slot": "\(slot)", "alexa.level": "\(shown)"])
        return "\(slot) at \(shown): reported to the maker's cloud"
    }

    /// A load cell's reading of `slot` (`ScaleReader`), durably.
    func recordReading(slot: String, value: Double) async throws(AgentError) {
        guard case .reading? = sensors[slot]?.kind else {
            throw AgentError(.invalidInput, "slot \(slot) has no scale")
        }
        try await change { $0.recordLevel(slot: slot, value: value, at: wallTime()) }
        logger.info("level recorded", metadata: ["alexa.slot": "\(slot)", "alexa.level": "\(Self.number(value))"])
    }

    /// The slot's latest level as `reports.json` holds it.
    func level(slot: String) -> Double? { record.levels[slot]?.value }

    /// A long press: ask the cloud about the claim now.
    func checkClaimSoon() {
        timeline.checkClaimSoon(at: clock.now)
        waker.ring()
    }

    /// The delivery loop, until cancelled: step, then wait for what the step says.
    func run() async {
        while !Task.isCancelled {
            let next = await step()
            await waker.wait(for: next, clock: clock)
        }
    }

    /// Carries out the timeline's actions until it says wait; returns the wait (tests drive it on a manual clock).
    func step() async -> LoopStep<C.Instant> {
        var worked = false
        while !Task.isCancelled {
            switch timeline.next(hasUnreported: record.hasUnreported, at: clock.now) {
            case .wait(let until): return .wait(until: until, worked: worked)
            case .send: await sendOnce()
            case .checkClaim: await checkClaim()
            }
            worked = true
        }
        return .wait(until: nil, worked: worked)
    }

    private func sendOnce() async {
        let before = current
        defer { if current != before { shown.publish(current) } }
        var next = record
        guard
            let report = next.report(
                unit: unit, sensors: sensors, daily: timeline.isDailyDue(at: clock.now), wallTime: wallTime())
        else {
            // Nothing to report after all: the day starts again, so the loop never asks twice at one instant.
            timeline.reported(daily: true, claimed: nil, at: clock.now)
            return
        }
        do throws(AgentError) {
            if next != record {
                try await store.save(next)
                record = next
            }
            let answer = try await cloud.send(report)
            var acknowledged = record
            let done = acknowledged.acknowledged(report.sequence, claimed: answer.claimed, at: wallTime())
            if acknowledged != record {
                try await store.save(acknowledged)
                record = acknowledged
            }
            timeline.reported(daily: done?.daily ?? false, claimed: answer.claimed, at: clock.now)
            logger.info(
                "report acknowledged",
                metadata: [
                    "alexa.sequence": "\(report.sequence)", "alexa.supplies": "\(report.supplies.count)",
                    "alexa.daily": "\(report.daily)",
                ])
            lastError = nil
        } catch {
            failed(error, retryAfter: CloudClient.retryAfter(error), doing: "report \(report.sequence)")
        }
    }

    private func checkClaim() async {
        let before = current
        defer { if current != before { shown.publish(current) } }
        do throws(AgentError) {
            let claimed = try await cloud.claimed()
            timeline.claimAnswered(claimed, at: clock.now)
            if record.claimed != claimed {
                var next = record
                next.claimed = claimed
                try await store.save(next)
                record = next
                logger.notice(claimed ? "the unit is claimed by a customer" : "the unit is not claimed yet")
            }
            lastError = nil
        } catch {
            failed(error, retryAfter: CloudClient.retryAfter(error), doing: "the claim check")
        }
    }

    private func failed(_ error: AgentError, retryAfter: Duration?, doing what: String) {
        let delay = Backoff.reports.delay(attempt: timeline.failures + 1, using: &random)
        timeline.failed(delay: delay, retryAfter: retryAfter, at: clock.now)
        logger.warning(
            "the maker's cloud did not take \(what); retrying",
            metadata: [
                "error": "\(error.message)", "alexa.retry.seconds": "\(Self.number(Double(delay.milliseconds) / 1000))",
            ])
        lastError = error.message
    }

    private func change(_ change: (inout ReportRecord) -> Void) async throws(AgentError) {
        let before = current
        var next = record
        change(&next)
        try await store.save(next)
        record = next
        if current != before { shown.publish(current) }
        waker.ring()
    }

    /// A number as the customer reads it: no `.0` on a whole one.
    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}

extension SupplyReporter: LoopingActor {}

extension StateStore<ReportRecord> {
    /// `reports.json` of the state directory, on the outbox's lane; its one owner is `SupplyReporter`.
    static func reports(stateDirectory: String) -> Self {
        StateStore(path: SupplyReporter<ContinuousClock>.path(stateDirectory: stateDirectory), lane: .outbox)
    }
}
