import Synchronization
import Testing

@testable import ReplenishAgent

/// A datagram socket the test binds itself, standing in for systemd's notify socket.
final class NotifySocket {
    let descriptor: Int32
    /// The `NOTIFY_SOCKET` value that names it.
    let variable: String

    /// `abstract`: an abstract name (`@…`) instead of a socket file in a temporary directory.
    init(abstract: Bool = false) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(descriptor >= 0)
        let name: [UInt8]
        if abstract {
            variable = "@replenish-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            name = [0] + Array(variable.utf8.dropFirst())
        } else {
            variable = temporaryDirectory() + "/notify"
            name = Array(variable.utf8)
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + name.count)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        try #require(bound == 0)
    }

    deinit {
        close(descriptor)
        if variable.hasPrefix("/") { unlink(variable) }
    }

    /// The next datagram already delivered, or nil. An AF_UNIX datagram is in the receiver's queue when
    /// sendto(2) returns, so there is nothing to wait for.
    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        guard count >= 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    func notifier(_ extra: [String: String] = [:]) -> SystemdNotifier {
        SystemdNotifier(environment: extra.merging(["NOTIFY_SOCKET": variable]) { $1 }, pid: 4242)
    }
}

@Suite(.tags(.unit)) struct SystemdNotifierTests {
    @Test func withoutNotifySocketNothingIsSentAndNoWatchdogRuns() {
        let notifier = SystemdNotifier(environment: ["WATCHDOG_USEC": "30000000"], pid: 1)
        #expect(!notifier.isEnabled)
        #expect(notifier.watchdogInterval == nil)
        #expect(notifier.ready(status: "x") == nil)
        #expect(notifier.watchdog() == nil)
    }

    @Test func addressesArePathsOrAbstractNames() {
        #expect(SystemdNotifier.address("/run/systemd/notify") == .path("/run/systemd/notify"))
        #expect(
            SystemdNotifier.address("@/org/freedesktop/systemd1/notify/1")
                == .abstract("/org/freedesktop/systemd1/notify/1"))
        #expect(SystemdNotifier.address("relative/path") == nil)
        #expect(SystemdNotifier.address("@") == nil)
        #expect(SystemdNotifier.address("") == nil)
        #expect(SystemdNotifier.address(nil) == nil)
    }

    @Test func watchdogIsHalfOfWatchdogUsecAndOnlyForItsPid() throws {
        let socket = try NotifySocket()
        #expect(socket.notifier(["WATCHDOG_USEC": "30000000"]).watchdogInterval == .seconds(15))
        #expect(
            socket.notifier(["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "4242"]).watchdogInterval == .seconds(15))
        #expect(socket.notifier(["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "4243"]).watchdogInterval == nil)
        #expect(socket.notifier(["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "x"]).watchdogInterval == nil)
        #expect(socket.notifier(["WATCHDOG_USEC": "0"]).watchdogInterval == nil)
        #expect(socket.notifier(["WATCHDOG_USEC": "-5"]).watchdogInterval == nil)
        #expect(socket.notifier(["WATCHDOG_USEC": "soon"]).watchdogInterval == nil)
        #expect(socket.notifier().watchdogInterval == nil)
        #expect(
            SystemdNotifications.gpioHeartbeat(socket.notifier(["WATCHDOG_USEC": "30000000"])) == .milliseconds(7500))
        #expect(SystemdNotifications.gpioHeartbeat(socket.notifier()) == nil)
    }

    @Test func messagesReachASocketFile() throws {
        let socket = try NotifySocket()
        let notifier = socket.notifier()
        #expect(notifier.isEnabled)
        #expect(notifier.ready(status: "paired") == nil)
        #expect(socket.receive() == "READY=1\nSTATUS=paired\n")
        #expect(notifier.status("two\nlines") == nil)
        #expect(socket.receive() == "STATUS=two lines\n")
        #expect(notifier.watchdog() == nil)
        #expect(socket.receive() == "WATCHDOG=1\n")
        #expect(notifier.stopping(status: "stopping") == nil)
        #expect(socket.receive() == "STOPPING=1\nSTATUS=stopping\n")
        #expect(socket.receive() == nil)
    }

    @Test func messagesReachAnAbstractSocket() throws {
        let socket = try NotifySocket(abstract: true)
        #expect(socket.variable.hasPrefix("@"))
        #expect(socket.notifier().watchdog() == nil)
        #expect(socket.receive() == "WATCHDOG=1\n")
    }

    @Test func aMissingOrUnusableSocketIsAReasonNotACrash() {
        let directory = temporaryDirectory()
        let gone = SystemdNotifier(environment: ["NOTIFY_SOCKET": directory + "/nobody"], pid: 1)
        #expect(gone.watchdog()?.contains("No such file") == true)
        let long = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/" + String(repeating: "x", count: 200)], pid: 1)
        #expect(long.watchdog() == "NOTIFY_SOCKET is longer than a socket address can hold")
    }
}

@Suite(.tags(.unit)) struct SystemdStatusTests {
    typealias State = TokenManager<ManualClock>.State

    @Test func linesNameThePairingTheTokenAndTheOutbox() {
        #expect(
            SystemdStatusLine.text(token: State.unpaired, pending: 0, parked: 0)
                == "pairing mode: waiting for the companion app; 0 orders pending")
        #expect(
            SystemdStatusLine.text(token: State.fresh(expiresAt: 1_800_000_000), pending: 1, parked: 0)
                == "paired; token fresh, expires 2027-01-15T08:00:00Z; 1 order pending")
        #expect(
            SystemdStatusLine.text(token: State.refreshing(expiresAt: 1_800_000_000), pending: 2, parked: 1)
                == "paired; token refreshing; 2 orders pending, 1 parked")
        #expect(
            SystemdStatusLine.text(
                token: State.retryWait(expiresAt: 0, reason: "network: timeout"), pending: 0, parked: 0)
                == "paired; token refresh failing, retrying (network: timeout); 0 orders pending")
        #expect(
            SystemdStatusLine.text(token: State.needsPairing(reason: "invalid_grant"), pending: 3, parked: 0)
                == "pairing mode: the pairing was revoked (invalid_grant), waiting for the companion app; 3 orders pending"
        )
    }

    @Test func linesGoOutBetweenReadyAndStoppingOnlyWhenTheyChange() async throws {
        let socket = try NotifySocket()
        let status = SystemdStatusKeeper<ManualClock>(
            notifier: socket.notifier(), token: .unpaired, pending: 0, parked: 0)
        await status.update(pending: 1, parked: 0)
        #expect(socket.receive() == nil)  // not ready yet
        #expect(await status.ready() == nil)
        #expect(socket.receive() == "READY=1\nSTATUS=pairing mode: waiting for the companion app; 1 order pending\n")
        await status.update(pending: 1, parked: 0)
        #expect(socket.receive() == nil)  // same text
        await status.update(token: .fresh(expiresAt: 1_800_000_000))
        #expect(socket.receive() == "STATUS=paired; token fresh, expires 2027-01-15T08:00:00Z; 1 order pending\n")
        #expect(await status.stopping() == nil)
        #expect(socket.receive() == "STOPPING=1\nSTATUS=stopping\n")
        await status.update(pending: 0, parked: 0)
        #expect(socket.receive() == nil)
    }
}

@Suite(.tags(.unit)) struct WatchdogTests {
    final class Recorder: Sendable {
        let healthy = Mutex(true)
        let pings = Mutex(0)
        let changes = Mutex<[String?]>([])
        var pingCount: Int { pings.withLock { $0 } }
        var changeList: [String?] { changes.withLock { $0 } }
    }

    func pinger(_ clock: ManualClock, _ recorder: Recorder, probes: [HealthProbe]? = nil) -> WatchdogPinger<ManualClock>
    {
        WatchdogPinger(
            interval: .seconds(15), clock: clock,
            probes: probes ?? [HealthProbe(name: "GPIO thread") { recorder.healthy.withLock { $0 } }],
            ping: { recorder.pings.withLock { $0 += 1 } },
            onHealthChange: { failing in recorder.changes.withLock { $0.append(failing) } })
    }

    @Test func pingsAtTheIntervalWhileHealthyAndStopsWhileAProbeFails() async throws {
        let clock = ManualClock()
        let recorder = Recorder()
        let watchdog = pinger(clock, recorder)
        let driver = StepDriver(clock: clock, watchdog.step)
        await driver.drain()
        #expect(recorder.pingCount == 1)
        await driver.pass(.seconds(14))
        #expect(recorder.pingCount == 1)
        await driver.pass(.seconds(1))
        #expect(recorder.pingCount == 2)
        await driver.pass(.seconds(15))
        #expect(recorder.pingCount == 3)

        recorder.healthy.withLock { $0 = false }
        await driver.pass(.seconds(15))
        #expect(recorder.changeList == ["GPIO thread"])
        await driver.pass(.seconds(30))
        #expect(recorder.pingCount == 3)
        #expect(recorder.changeList == ["GPIO thread"])  // reported once per failing streak

        recorder.healthy.withLock { $0 = true }
        await driver.pass(.seconds(15))
        #expect(recorder.pingCount == 4)
        #expect(recorder.changeList == ["GPIO thread", nil])
    }

    @Test func aProbeThatNeverAnswersStopsThePings() async throws {
        let clock = ManualClock()
        let recorder = Recorder()
        let (stuck, release) = AsyncStream.makeStream(of: Void.self)
        let (hung, hangs) = AsyncStream.makeStream(of: Void.self)
        let answers = Mutex(0)
        let probe = HealthProbe(name: "event loop") {
            let call = answers.withLock { count -> Int in
                count += 1
                return count
            }
            // The second check hangs, as a wedged loop's job would.
            if call >= 2 {
                hangs.yield()
                for await _ in stuck {}
            }
            return true
        }
        let watchdog = pinger(clock, recorder, probes: [probe])
        let driver = StepDriver(clock: clock, watchdog.step)
        await driver.drain()
        #expect(recorder.pingCount == 1)
        // A minute passes with the second round stuck in its probe: no ping comes, nothing else could send one.
        let stepping = Task { await driver.pass(.seconds(60)) }
        for await _ in hung { break }
        #expect(recorder.pingCount == 1)
        #expect(answers.withLock { $0 } == 2)
        stepping.cancel()
        release.finish()
        await stepping.value
        #expect(recorder.pingCount == 1, "a round that ends cancelled pings nothing")
    }

    @Test func roundsAreDueEveryIntervalPingOnlyWhenHealthyAndReportAChangeOncePerStreak() {
        typealias Instant = ManualClock.Instant
        func at(_ seconds: Int) -> Instant { Instant(offset: .seconds(seconds)) }
        var rounds = WatchdogRounds<Instant>(interval: .seconds(15))
        #expect(rounds.due(at: at(0)) == nil)
        #expect(rounds.roundDone(failed: nil, at: at(0)) == .init(ping: true, healthChange: .none, nextRound: at(15)))
        #expect(rounds.due(at: at(14)) == at(15))
        #expect(rounds.due(at: at(15)) == nil)
        #expect(
            rounds.roundDone(failed: "GPIO thread", at: at(15))
                == .init(ping: false, healthChange: .some("GPIO thread"), nextRound: at(30)))
        #expect(
            rounds.roundDone(failed: "GPIO thread", at: at(30))
                == .init(ping: false, healthChange: .none, nextRound: at(45)))
        #expect(
            rounds.roundDone(failed: nil, at: at(45)) == .init(ping: true, healthChange: .some(nil), nextRound: at(60)))
    }

    @Test func aFallBackToLibdispatchIsWarnedAboutAndTheLoopIsNot() {
        #expect(LoopExecutor.Installed.loop("hooks").fallbackWarning == nil)
        let warning = LoopExecutor.Installed.libdispatch("compiler 5.10").fallbackWarning
        #expect(warning?.contains("libdispatch (fallback: compiler 5.10)") == true)
        #expect(LoopExecutor.Installed.notTried.fallbackWarning != nil)
    }

    @Test func heartbeatPassesOnlyWhileTheCounterMoves() {
        let beats = Mutex<UInt64>(0)
        let probe = HeartbeatProbe { beats.withLock { $0 } }
        #expect(probe.check())  // nothing to compare yet
        #expect(!probe.check())
        beats.withLock { $0 += 3 }
        #expect(probe.check())
        #expect(!probe.check())
        beats.withLock { $0 += 1 }
        #expect(probe.check())
    }
}

#if canImport(Glibc)
    import Glibc
#endif

extension SystemdStatusTests {
    @Test func inCodeModeTheStatusLineSaysACodeIsAwaitedNotTheApp() {
        let line = SystemdStatusLine.text(
            token: State.unpaired, pending: 0, parked: 0,
            waitingFor: "the code to be entered (replenish-agent status shows it)")
        #expect(
            line
                == "pairing mode: waiting for the code to be entered (replenish-agent status shows it); 0 orders pending"
        )
        #expect(!line.contains("companion"))
    }
}
