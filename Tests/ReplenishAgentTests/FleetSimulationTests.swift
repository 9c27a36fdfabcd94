import Testing

@testable import ReplenishAgent

/// 10,000 devices back from the same power cut in the same second, scheduled by the agent's own rules
/// (`FleetSpread`, `RefreshSchedule`, the token manager's start-up catch-up): LWA and DRS requests per
/// minute over the first hour. `scripts/fleet-sim.sh` runs this and prints the table.
@Suite(.tags(.unit)) struct FleetSimulationTests {
    struct Result {
        var perMinute: [Int]
        var peak: Int { perMinute.max() ?? 0 }
        var meanOfFirstTen: Double { Double(perMinute.prefix(10).reduce(0, +)) / 10 }
        var ratio: Double { Double(peak) / meanOfFirstTen }
    }

    /// Every request one device makes in the first hour after power returns, in seconds from then.
    static func requests(window: Duration, random: inout RandomSource) -> [Double] {
        let lifetime = 3600.0
        // The stored token: the cut lasted long enough that most expired while the device was off.
        let expiresAt = Double.random(in: -7200...3600, using: &random)
        var jitter = Double.random(in: 0..<1, using: &random)
        var times: [Double] = []
        // A press queued before the cut (2 % of devices) goes out at start.
        if Double.random(in: 0..<1, using: &random) < 0.02 { times.append(0) }
        // Device status and subscription info at a moment of the start-up window (`Duties.run`).
        let duties = seconds(FleetSpread.startupDelay(window: window, using: &random))
        times += [duties, duties]
        // The token: refreshed at its schedule; one that is already due waits a moment of the start-up window
        // (`TokenManager.run`), unless the duties need a token first (`accessToken()` refreshes on demand).
        var refresh = RefreshSchedule.secondsUntilRefresh(
            now: 0, expiresAt: expiresAt, lifetime: lifetime, jitter: jitter)
        if refresh <= 0 {
            let tokenWindow = min(window, .milliseconds(Int64(lifetime * 100)))
            refresh = seconds(FleetSpread.startupDelay(window: tokenWindow, using: &random))
        }
        if RefreshSchedule.isTooCloseToExpiry(now: duties, expiresAt: expiresAt, lifetime: lifetime) {
            refresh = min(refresh, duties)
        }
        while refresh < 3600 {
            times.append(refresh)
            jitter = Double.random(in: 0..<1, using: &random)
            refresh += RefreshSchedule.secondsUntilRefresh(
                now: 0, expiresAt: lifetime, lifetime: lifetime, jitter: jitter)
        }
        return times
    }

    static func seconds(_ duration: Duration) -> Double { Double(duration.milliseconds) / 1000 }

    static func simulate(devices: Int, window: Duration, seed: UInt64) -> Result {
        var perMinute = [Int](repeating: 0, count: 60)
        var random = RandomSource.seeded(state: seed)
        for _ in 0..<devices {
            for time in requests(window: window, random: &random) where time < 3600 {
                perMinute[Int(time / 60)] += 1
            }
        }
        return Result(perMinute: perMinute)
    }

    static func table(_ results: [(String, Result)]) -> String {
        var lines = ["minute | " + results.map(\.0).joined(separator: " | ")]
        for minute in 0..<60 {
            lines.append("\(minute) | " + results.map { String($0.1.perMinute[minute]) }.joined(separator: " | "))
        }
        lines.append("peak minute | " + results.map { String($0.1.peak) }.joined(separator: " | "))
        lines.append(
            "mean of minutes 0-9 | "
                + results.map { String(Int($0.1.meanOfFirstTen.rounded())) }
                .joined(separator: " | "))
        lines.append(
            "peak / mean | " + results.map { String(Double(Int($0.1.ratio * 100)) / 100) }.joined(separator: " | "))
        return lines.joined(separator: "\n")
    }

    @Test func tenThousandDevicesBackInTheSameSecond() {
        let contract = Self.simulate(devices: 10_000, window: FleetSpread.startupWindow, seed: 2026)
        let fleet = Self.simulate(devices: 10_000, window: .seconds(600), seed: 2026)
        print("FLEET-SIM requests per minute, 10,000 devices, seed 2026")
        print(Self.table([("25 s start-up window (docs/behaviour.md)", contract), ("600 s start-up window", fleet)]))
        // Every device's start-up requests land inside its window, whatever the seed.
        #expect(contract.perMinute[0] >= 3 * 9_000)
        // With a ten-minute window the start-up load is flat: the peak minute is at most twice the mean.
        #expect(fleet.ratio <= 2, "peak \(fleet.peak) vs mean \(fleet.meanOfFirstTen)")
        // The same schedule with a 30 s promise cannot be flat: all start-up work lands in the first minute.
        #expect(contract.ratio > 2)
    }
}
