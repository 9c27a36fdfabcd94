import FoundationEssentials
import Logging
import Testing

@testable import ReplenishAgent

/// Program alexa's reports as values and on a manual clock: what a report carries, the frozen report in flight,
/// the daily report, a day offline, `Retry-After`.
@Suite(.tags(.unit)) struct SupplyReportTests: OnInstants {
    static let sensors: [String: AgentConfig.SupplySensor] = [
        "pods": .init(kind: .usage(unitsPerPress: 2), dashReplenishmentId: "drid-pods"),
        "tank": .init(kind: .level(measurement: .percentage, low: 10, full: 100), dashReplenishmentId: nil),
        "flour": .init(
            kind: .level(measurement: .weight(unit: "KILOGRAM"), low: 0.2, full: 2), dashReplenishmentId: nil),
    ]

    func report(_ record: inout ReportRecord, daily: Bool = false, at wallTime: Double? = 2000) -> SupplyReport? {
        record.report(unit: "UNIT1", sensors: Self.sensors, daily: daily, wallTime: wallTime)
    }

    @Test func usageIsSummedAndTheReportInFlightIsResentUnchanged() throws {
        var record = ReportRecord(stream: "00000000000000aa")
        record.recordUsage(slot: "pods", units: 2, at: 1000)
        record.recordUsage(slot: "pods", units: 2, at: 1001)
        let made1 = report(&record)
        let first = try #require(made1)
        #expect(first.sequence == 1 && first.stream == "00000000000000aa" && !first.daily)
        #expect(
            first.supplies == [
                .init(
                    slot: "pods", dashReplenishmentId: "drid-pods", usage: .init(type: "Count", value: 4),
                    at: ISO8601.format(1001))
            ])
        // A press while the report is out waits for the next one; the one out goes again as it was.
        record.recordUsage(slot: "pods", units: 2, at: 1003)
        let again = report(&record, at: 2100)
        #expect(again == first)
        // An answer for another number changes nothing; its own acknowledgement ends it.
        let other = record.acknowledged(7, claimed: nil, at: 2200)
        #expect(other == nil && record.inFlight == first)
        let done = record.acknowledged(1, claimed: true, at: 2200)
        #expect(done == first && record.claimed == true)
        let made2 = report(&record)
        let second = try #require(made2)
        #expect(second.sequence == 2 && second.supplies.map(\.usage?.value) == [2])
        let secondDone = record.acknowledged(2, claimed: nil, at: 2300)
        #expect(secondDone == second)
        let nothing = report(&record)
        #expect(nothing == nil && !record.hasUnreported)
    }

    @Test func aLevelIsSentAsItsLatestReadingWithItsMeasurement() throws {
        var record = ReportRecord(stream: "00000000000000aa")
        record.recordLevel(slot: "tank", value: 10, at: 1000)
        record.recordLevel(slot: "tank", value: 100, at: 1100)
        record.recordLevel(slot: "flour", value: 0.2, at: nil)
        let madeNow = report(&record, at: nil)
        let made = try #require(madeNow)
        #expect(made.madeAt == nil)
        #expect(
            made.supplies == [
                .init(slot: "flour", level: .init(type: "Weight", value: 0.2, unit: "KILOGRAM"), at: nil),
                .init(slot: "tank", level: .init(type: "Percentage", value: 100), at: ISO8601.format(1100)),
            ])
        // The wire form is Alexa's: `@type`, no unit on a Percentage.
        let json = String(decoding: try JSONEncoder().encode(made.supplies[1].level), as: UTF8.self)
        #expect(json.contains(#""@type":"Percentage""#) && !json.contains("unit"))
    }

    @Test func theDailyReportCarriesEveryLevelUnchanged() throws {
        var record = ReportRecord(stream: "00000000000000aa")
        record.recordLevel(slot: "tank", value: 10, at: 1000)
        let changed = report(&record)
        let change = try #require(changed)
        _ = record.acknowledged(change.sequence, claimed: nil, at: 1500)
        let none = report(&record)
        #expect(none == nil)
        let madeDaily = report(&record, daily: true, at: 90000)
        let daily = try #require(madeDaily)
        #expect(daily.daily && daily.sequence == 2 && daily.supplies.map(\.level?.value) == [10])
        _ = record.acknowledged(2, claimed: nil, at: 90001)
        #expect(record.lastDailyAt == 90001)
        // A daily report with no level to carry still goes: it says the unit is alive.
        var empty = ReportRecord(stream: "00000000000000bb")
        let alive = report(&empty, daily: true)
        #expect(alive?.supplies == [])
    }

    @Test func aLevelWhoseSensorLeftTheConfigIsNotSentForever() {
        var record = ReportRecord(stream: "00000000000000aa")
        record.recordLevel(slot: "gone", value: 5, at: nil)
        let gone = report(&record)
        #expect(gone?.supplies == [])
        _ = record.acknowledged(1, claimed: nil, at: nil)
        #expect(!record.hasUnreported)
    }

    @Test func theTimelineWaitsOutTheBackoffAndRetryAfterAndTheDay() {
        var timeline = ReportTimeline(dailyAt: at(86400), claimed: true, at: start)
        #expect(timeline.next(hasUnreported: false, at: start) == .wait(until: at(86400)))
        #expect(timeline.next(hasUnreported: true, at: start) == .send)
        timeline.failed(delay: .seconds(2), retryAfter: .seconds(30), at: at(1))
        #expect(timeline.next(hasUnreported: true, at: at(5)) == .wait(until: at(31)))
        #expect(timeline.failures == 1)
        // A Retry-After of a week is held to an hour.
        timeline.failed(delay: .seconds(4), retryAfter: .seconds(7 * 86400), at: at(31))
        #expect(timeline.next(hasUnreported: true, at: at(32)) == .wait(until: at(3631)))
        timeline.reported(daily: false, claimed: true, at: at(3631))
        #expect(timeline.failures == 0 && timeline.next(hasUnreported: false, at: at(3631)) == .wait(until: at(86400)))
        #expect(timeline.next(hasUnreported: false, at: at(86400)) == .send)
        timeline.reported(daily: true, claimed: true, at: at(86400))
        #expect(timeline.next(hasUnreported: false, at: at(86400)) == .wait(until: at(172_800)))
    }

    @Test func anUnclaimedUnitAsksAboutItsClaimUntilClaimed() {
        var timeline = ReportTimeline(dailyAt: at(86400), claimed: nil, at: start)
        #expect(timeline.next(hasUnreported: false, at: start) == .checkClaim)
        timeline.claimAnswered(false, at: start)
        #expect(timeline.next(hasUnreported: false, at: start) == .wait(until: at(600)))
        timeline.claimAnswered(true, at: at(600))
        #expect(timeline.next(hasUnreported: false, at: at(600)) == .wait(until: at(86400)))
        timeline.checkClaimSoon(at: at(700))
        #expect(timeline.next(hasUnreported: false, at: at(700)) == .checkClaim)
    }

    @Test func theFirstDailyReportFollowsTheLastOneAcrossARestart() {
        // 20 hours since the last daily report: the next in 4 hours; a clock set back, or none: at once.
        #expect(ReportTimeline.firstDaily(lastDailyAt: 1000, wallTime: 1000 + 72000, now: start) == at(14400))
        #expect(ReportTimeline.firstDaily(lastDailyAt: 1000, wallTime: 1000 + 90000, now: start) == start)
        #expect(ReportTimeline.firstDaily(lastDailyAt: 5000, wallTime: 1000, now: start) == start)
        #expect(ReportTimeline.firstDaily(lastDailyAt: nil, wallTime: 1000, now: start) == start)
        #expect(ReportTimeline.firstDaily(lastDailyAt: 1000, wallTime: nil, now: start) == start)
    }
}

/// The reporter's loop on a manual clock, with the cloud as a double: a day offline, the daily report.
@Suite(.tags(.unit)) struct SupplyReporterTests {
    static func settings() throws -> AgentConfig.AlexaSettings {
        AgentConfig.AlexaSettings(
            cloudURL: try EndpointURL("https://cloud.example"), certificateFile: "/unit.pem", keyFile: "/unit.key",
            unitId: "UNIT1")
    }

    /// A cloud that applies each (stream, sequence) once and acknowledges, while `online`.
    final class Cloud: Sendable {
        let online = Locked(true)
        let applied = Locked<[SupplyReport]>([])
        let attempts = Locked(0)

        var client: ScriptedHTTPClient {
            ScriptedHTTPClient { [self] request throws(AgentError) in
                attempts.value += 1
                guard online.value else { throw AgentError(.network, "couldn't connect") }
                if request.method == .get {
                    return HTTPResponse(status: 200, headers: [], body: Array(#"{"claimed":true}"#.utf8))
                }
                guard let body = request.body,
                    let report = try? JSONDecoder().decode(SupplyReport.self, from: Data(body))
                else { throw AgentError(.invalidInput, "not a report") }
                if !applied.value.contains(where: { $0.stream == report.stream && $0.sequence == report.sequence }) {
                    applied.value.append(report)
                }
                return HTTPResponse(
                    status: 200, headers: [], body: Array(#"{"acknowledged":\#(report.sequence),"claimed":true}"#.utf8))
            }
        }
    }

    func reporter(
        clock: ManualClock, cloud: Cloud, directory: String = temporaryDirectory(), wall: Double = 1_800_000_000
    )
        throws -> SupplyReporter<ManualClock>
    {
        let wallTime = clock.wallTime(from: wall)
        return try SupplyReporter(
            unit: "UNIT1", sensors: SupplyReportTests.sensors,
            store: StateStore(path: directory + "/reports.json"),
            cloud: CloudClient(http: cloud.client, settings: try Self.settings()), clock: clock,
            wallTime: { wallTime() }, random: .seeded(state: 7),
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, onCorrupt: { _ in })
    }

    @Test func aDayOfflineLosesNoPressAndCountsNoneTwice() async throws {
        let clock = ManualClock()
        let cloud = Cloud()
        let reporter = try reporter(clock: clock, cloud: cloud)
        let driver = StepDriver(clock: clock, reporter.step)
        await driver.drain()
        cloud.online.value = false
        for _ in 0..<24 {
            _ = try await reporter.recordUsage(slot: "pods")
            await driver.pass(.seconds(3600))
        }
        let triedOffline = cloud.attempts.value
        cloud.online.value = true
        await driver.pass(.seconds(16 * 60))
        let applied = cloud.applied.value
        // The daily report (at the start) and the presses: 24 presses of 2 units, each counted once.
        let used = applied.flatMap(\.supplies).compactMap(\.usage?.value).reduce(0, +)
        #expect(used == 48)
        let shown = await reporter.current
        #expect(!shown.unreported && shown.lastError == nil)
        // The backoff held the calls of the day to its cap (15 minutes, at least half of it with the jitter): at
        // most one every 7.5 minutes once it got there, not one a second.
        #expect(triedOffline <= 24 * 8 + 20)
        #expect(Set(applied.map(\.sequence)).count == applied.count)
    }

    @Test func theDailyReportGoesEveryDayWithNothingChanged() async throws {
        let clock = ManualClock()
        let cloud = Cloud()
        let reporter = try reporter(clock: clock, cloud: cloud)
        let driver = StepDriver(clock: clock, reporter.step)
        _ = try await reporter.recordLevel(slot: "tank", low: true)
        await driver.drain()
        #expect(cloud.applied.value.map(\.daily) == [true])
        await driver.pass(.seconds(24 * 3600 - 1))
        #expect(cloud.applied.value.count == 1)
        await driver.pass(.seconds(1))
        await driver.pass(.seconds(24 * 3600))
        let dailies = cloud.applied.value.filter(\.daily)
        #expect(dailies.count == 3 && dailies.allSatisfy { $0.supplies.map(\.level?.value) == [10] })
    }

    @Test func aRestartResendsTheReportInFlightUnderItsNumber() async throws {
        let clock = ManualClock()
        let cloud = Cloud()
        let directory = temporaryDirectory()
        let first = try reporter(clock: clock, cloud: cloud, directory: directory)
        await StepDriver(clock: clock, first.step).drain()
        // The cloud applies the next report, but its answer is lost (the unit's power is cut before it lands).
        cloud.online.value = false
        _ = try await first.recordUsage(slot: "pods")
        await StepDriver(clock: clock, first.step).drain()
        var record = try #require(try StateStore<ReportRecord>(path: directory + "/reports.json").load { _ in })
        let made = record.report(unit: "UNIT1", sensors: SupplyReportTests.sensors, daily: false, wallTime: nil)
        let out = try #require(made)
        cloud.applied.value.append(out)
        cloud.online.value = true
        let second = try reporter(clock: clock, cloud: cloud, directory: directory)
        await StepDriver(clock: clock, second.step).drain()
        #expect(cloud.applied.value.filter { $0.sequence == out.sequence }.count == 1)
        #expect(cloud.applied.value.flatMap(\.supplies).compactMap(\.usage?.value) == [2])
        let shown = await second.current
        #expect(!shown.unreported)
    }
}

/// A load cell (`alexa.scales`) on a manual clock: its counts in a file, read every poll.
@Suite(.tags(.unit)) struct ScaleReaderTests {
    static let scale = AgentConfig.Scale(
        slot: "flour", file: "", zeroCounts: 8300, countsPerUnit: 1000, measurement: .weight(unit: "KILOGRAM"),
        pollSeconds: 60, minimumChange: 0.05)

    @Test func countsBecomeTheLevelInTheScalesMeasurement() {
        #expect(ScaleReader<ManualClock>.level(counts: 10300, scale: Self.scale) == 2)
        #expect(ScaleReader<ManualClock>.level(counts: 8000, scale: Self.scale) == 0)
        var count = Self.scale
        count.measurement = .count
        count.countsPerUnit = 400
        #expect(ScaleReader<ManualClock>.level(counts: 8300 + 1000, scale: count) == 3)
        #expect(ScaleReader<ManualClock>.median(["5\n", "900", "7", "6", "8"]) == 7)
        #expect(ScaleReader<ManualClock>.median(["5", "x"]) == nil)
    }

    @Test func aScaleReportsItsLevelOnlyWhenItMovesAndSurvivesAFileWithoutANumber() async throws {
        let clock = ManualClock()
        let cloud = SupplyReporterTests.Cloud()
        let directory = temporaryDirectory()
        let file = directory + "/in_voltage0_raw"
        var scale = Self.scale
        scale.file = file
        try "10300\n".write(toFile: file, atomically: true, encoding: .utf8)
        let wallTime = clock.wallTime(from: 1_800_000_000)
        let reporter = try SupplyReporter(
            unit: "UNIT1", sensors: ["flour": .init(kind: .reading(measurement: scale.measurement))],
            store: StateStore(path: directory + "/reports.json"),
            cloud: CloudClient(http: cloud.client, settings: try SupplyReporterTests.settings()), clock: clock,
            wallTime: { wallTime() }, random: .seeded(state: 3),
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, onCorrupt: { _ in })
        let reader = ScaleReader(
            scale: scale, reporter: reporter, clock: clock, disk: .shared,
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        let driver = StepDriver(clock: clock, reader.step, reporter.step)
        await driver.drain()
        func levels() -> [Double] { cloud.applied.value.flatMap(\.supplies).compactMap(\.level?.value) }
        #expect(levels() == [2])
        // Less than minimumChange: nothing new. Garbage: nothing, and the reader goes on.
        try "10320\n".write(toFile: file, atomically: true, encoding: .utf8)
        await driver.pass(.seconds(60))
        try "not a number\n".write(toFile: file, atomically: true, encoding: .utf8)
        await driver.pass(.seconds(60))
        #expect(levels() == [2])
        try "9300\n".write(toFile: file, atomically: true, encoding: .utf8)
        await driver.pass(.seconds(60))
        #expect(levels() == [2, 1])
        #expect(cloud.applied.value.last?.supplies.first?.level == .init(type: "Weight", value: 1, unit: "KILOGRAM"))
    }
}
