import Foundation
import Testing

@testable import ReplenishAgent

/// Ordinary bad luck in people's homes, against the real binaries (issue #19): a day without the network, a
/// reboot that restores an old clock, an owner change while LWA rotates refresh tokens. Each test failed on
/// the main this work started from.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct RealHomesTests {
    /// libfaketime, preloaded into the agent to move its wall clock (CLOCK_REALTIME) only: the monotonic
    /// clocks its timers run on are left alone (`FAKETIME_DONT_FAKE_MONOTONIC`). Installed by
    /// `scripts/install-deps.sh` (Debian's `libfaketime`).
    static func faketimeLibrary() throws -> String {
        let candidates = ["x86_64-linux-gnu", "aarch64-linux-gnu"].map { "/usr/lib/\($0)/faketime/libfaketime.so.1" }
        guard let found = candidates.first(where: { FileManager.default.fileExists(atPath: $0) }) else {
            throw AgentError(.configuration, "libfaketime is not installed (apt-get install libfaketime)")
        }
        return found
    }

    /// The agent's environment with its wall clock offset by what `offsetFile` says (`+0`, `+90000`: seconds).
    /// Started through `/usr/bin/env` (`fakedWallClockLauncher`): libfaketime's constructor adds
    /// `FAKETIME_SHARED` to the environment of the first preloaded process, and a Swift program whose
    /// environment changes that early sees no command-line arguments (measured: `CommandLine.arguments` is
    /// `[]`); env, preloaded first, sets the variable and the agent it runs inherits it.
    static let fakedWallClockLauncher = "/usr/bin/env"

    static func fakedWallClock(offsetFile: String) throws -> [String: String] {
        try "+0\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
        return [
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "LD_PRELOAD": try faketimeLibrary(),
            "FAKETIME_TIMESTAMP_FILE": offsetFile,
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_CACHE_DURATION": "1",
        ]
    }

    func placed(_ harness: Harness, _ emulator: String, slot: String = "slot-1") throws -> Int {
        try harness.replenishEvents(emulator).filter {
            $0["slot"] as? String == slot && $0["outcome"] as? String == "placed"
        }.count
    }

    /// #19.1: with DRS unreachable (connections refused: no byte of any call left the device) for 25 hours of
    /// wall clock, the press is still ordered, exactly once, when the network comes back.
    @Test func aDayOfflineStillOrdersThePressOnceWhenTheNetworkIsBack() throws {
        let harness = Harness()
        let offsetFile = harness.directory + "/faketime-offset"
        let environment = try Self.fakedWallClock(offsetFile: offsetFile)
        let stateFile = harness.directory + "/emulator-state.json"
        let (emulator, config, agent, _) = try harness.startPairedAgent(
            emulatorArguments: ["--state-file", stateFile], agentEnvironment: environment,
            agentLauncher: Self.fakedWallClockLauncher)
        let port = Int(emulator.split(separator: ":").last!)!
        try harness.stopEmulators()
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("two refused attempts") { harness.loggedReplenishAttempts(slot: "slot-1") >= 2 }
        // A day and an hour later by the wall clock (the agent's monotonic timers go on as they were).
        func failures() -> Int {
            harness.agentLogs.components(separatedBy: "(curl 7)").count - 1
        }
        let failuresBefore = failures()
        try "+90000\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
        // The agent's next tries (its access token has expired by the wall clock, so they are refreshes).
        try harness.waitUntil("two more refused tries after the day went by", timeout: 60) {
            failures() >= failuresBefore + 2 || harness.agentLogs.contains("order parked")
        }
        #expect(try harness.statusJSON(config: config)["parkedOrders"] as? Int == 0)
        _ = try harness.startEmulator(["--state-file", stateFile, "--slots", "slot-1"], port: port)
        try harness.waitUntil("the order once the network is back", timeout: 120) {
            let status = try harness.statusJSON(config: config)
            return status["pendingOrders"] as? Int == 0
        }
        #expect(try harness.statusJSON(config: config)["parkedOrders"] as? Int == 0)
        #expect(try placed(harness, emulator) == 1)
        #expect(agent.isRunning)
        harness.expectNoSecretsInAgentOutput()
    }

    /// A press whose call places the order and loses its answer (every later call is dropped unanswered and
    /// undone, so the agent keeps not knowing), the power cut (SIGKILL), and the order delivered meanwhile: a
    /// resend now would place a second one.
    func pressLoseTheAnswerAndCutThePower(
        _ harness: Harness, _ emulator: String, _ config: String, _ agent: Process
    ) throws {
        try harness.injectFault(emulator, path: "/replenish/slot-1", count: 1, #"{"kind":"dropAfterWork"}"#)
        try harness.injectFault(emulator, path: "/replenish/slot-1", count: 1000, #"{"kind":"drop"}"#)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the order placed, its answer lost") { try placed(harness, emulator) == 1 }
        try harness.kill9(agent)
        _ = try harness.emulator(emulator, .delete, "/admin/faults")
        _ = try harness.emulator(emulator, .post, "/admin/deliver/slot-1")
    }

    /// #19.2: a call whose answer was lost, a power cut, the order delivered meanwhile, and a reboot that
    /// restores the wall clock to the shutdown's time (fake-hwclock, timesyncd's clock file): the restarted
    /// agent must not resend before the clock is known synchronised (DRS would place a second order).
    @Test func aRebootWithARestoredClockDoesNotOrderTwice() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        try pressLoseTheAnswerAndCutThePower(harness, emulator, config, agent)
        // The power cut was a reboot: the outbox's mark was written during another boot.
        let outboxPath = harness.directory + "/state/outbox.json"
        var outbox =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: outboxPath)))
            as! [String: Any]
        var entries = outbox["entries"] as! [[String: Any]]
        #expect(entries.count == 1 && entries[0]["unansweredSince"] != nil)
        entries[0]["unansweredBoot"] = "00000000-0000-4000-8000-000000000000"
        outbox["entries"] = entries
        try JSONSerialization.data(withJSONObject: outbox).write(to: URL(fileURLWithPath: outboxPath))
        // The wall clock after the reboot is the shutdown's (a few seconds on): the restored clock.
        _ = try harness.startAgent(config: config)
        try harness.waitUntil("status to say what the order waits for", timeout: 30) {
            let slot = try harness.slotStatus(config: config, "slot-1")
            return (slot["waitingFor"] as? String)?.contains("clock") == true
        }
        #expect(try harness.statusJSON(config: config)["pendingOrders"] as? Int == 1)
        let text = try harness.run("replenish-agent", ["status", "--config", config]).output
        #expect(text.contains("waiting for the wall clock to be synchronised"))
        #expect(try placed(harness, emulator) == 1)
        #expect(!harness.read("agent-2.log").contains("sending replenish"))
        harness.expectNoSecretsInAgentOutput()
    }

    /// #29.1 and #29.2, as shipped: the same power cut inside a replenish call with the agent under the unit's
    /// view of /proc (`ProcSubset=pid` hides the kernel's boot id), the reboot being the runtime directory
    /// emptied (a tmpfs) and the clock restored, on a machine where nothing says the clock is synchronised.
    /// The restarted agent does not resend (1 order, not 2); a press made after the reboot orders at once.
    @Test func underTheUnitsProcARebootWithARestoredClockOrdersOnceAndANewPressOrders() throws {
        let harness = Harness()
        let launcher = try harness.unitsProcLauncher()
        let (emulator, config, agent, _) = try harness.startPairedAgent(agentLauncher: launcher)
        try pressLoseTheAnswerAndCutThePower(harness, emulator, config, agent)
        // The power cut was a reboot: the runtime directory is a tmpfs, empty again.
        try? FileManager.default.removeItem(atPath: harness.directory + "/run")
        #expect(!FileManager.default.fileExists(atPath: harness.directory + "/run"))
        _ = try harness.startAgent(config: config, launcher: launcher)
        try harness.waitUntil("status to say what the order waits for", timeout: 30) {
            let slot = try harness.slotStatus(config: config, "slot-1")
            return (slot["waitingFor"] as? String)?.contains("clock") == true
        }
        #expect(try placed(harness, emulator) == 1)
        #expect(!harness.read("agent-2.log").contains("sending replenish"))
        // A press of this boot is not held behind the call of the earlier one: it orders now, once. (The status
        // above reads the files: until the agent's control socket is up, `press` presses nothing and says so.)
        try harness.waitUntil("a press accepted") {
            try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0
        }
        try harness.waitUntil("the new press ordered", timeout: 30) {
            try harness.statusJSON(config: config)["pendingOrders"] as? Int == 0
        }
        #expect(try placed(harness, emulator) == 2)
        #expect(harness.loggedReplenishAttempts(slot: "slot-1") >= 2)
        harness.expectNoSecretsInAgentOutput()
    }

    /// Waits until DRS has deregistered the device and the agent has removed its queued deregistration; then
    /// the arrival times of every DELETE of the registration.
    func queuedDeregistrationArrivals(_ harness: Harness, _ emulator: String) throws -> [Double] {
        try harness.waitUntil("DRS to deregister the device", timeout: 60) {
            try harness.stats(emulator)["deregistrations"] as? Int == 1
        }
        // The emulator counts the call before its answer reaches the agent, which removes the file only then.
        try harness.waitUntil("the queued deregistration to be removed", timeout: 15) {
            !FileManager.default.fileExists(atPath: harness.directory + "/state/deregistration.json")
        }
        return try deregistrationArrivals(harness, emulator)
    }

    /// The `DELETE /registration` calls the emulator received, with their arrival times.
    func deregistrationArrivals(_ harness: Harness, _ emulator: String) throws -> [Double] {
        try harness.arrivals(emulator, path: "/registration").filter { $0["method"] as? String == "DELETE" }
            .compactMap { $0["at"] as? Double }
    }

    /// #19.3 and #19.4, through the daemon: LWA rotates refresh tokens (the previous one ends at once) and the
    /// DELETE fails twice. The queued deregistration keeps the newest refresh token, so DRS still hears it;
    /// and no retry comes sooner than 1 s after the one before.
    @Test func aQueuedDeregistrationSurvivesTokenRotationThroughTheDaemon() throws {
        let harness = Harness()
        let (emulator, config, _, _) = try harness.startPairedAgent(
            emulatorArguments: ["--rotate-refresh-tokens", "--old-refresh-token-policy", "invalidate"])
        try harness.injectFault(emulator, path: "/registration", count: 2, #"{"kind":"status","status":503}"#)
        let reset = try harness.run("replenish-agent", ["reset", "--config", config])
        #expect(reset.status == 0, "\(reset.error)")
        let times = try queuedDeregistrationArrivals(harness, emulator)
        #expect(times.count == 3, "DELETEs at \(times); the agent's log:\n\(harness.agentLogs)")
        for (earlier, later) in zip(times, times.dropFirst()) {
            #expect(later - earlier >= 1.0, "a retry came \(later - earlier) s after the call before it")
        }
        harness.expectNoSecretsInAgentOutput()
    }

    /// #19.3, offline: `deregister` with no daemon running refreshes (a rotation), the DELETE fails; the queued
    /// call the next start makes must use the rotated token, not the one LWA has ended.
    @Test func anOfflineDeregistrationSurvivesTokenRotation() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent(
            emulatorArguments: ["--rotate-refresh-tokens", "--old-refresh-token-policy", "invalidate"])
        try harness.stop(agent)
        try harness.injectFault(emulator, path: "/registration", count: 2, #"{"kind":"status","status":503}"#)
        let offline = try harness.run("replenish-agent", ["deregister", "--config", config])
        #expect(offline.status == 0, "\(offline.error)")
        #expect(offline.output.contains("queued"), "deregister said: \(offline.output)")
        _ = try harness.startAgent(config: config)
        let times = try queuedDeregistrationArrivals(harness, emulator)
        #expect(times.count == 3, "DELETEs at \(times); the agent's log:\n\(harness.agentLogs)")
        harness.expectNoSecretsInAgentOutput()
    }

    // MARK: - #19.5: a stop is bounded

    /// SIGTERM, then the agent must be gone within the 10 s graceful limit (polled, 15 s at most). Prints the figure
    /// (`stop: … ms …`) that docs/behaviour.md's "How long does a stop take, and why?" quotes.
    @discardableResult
    func stopWithinTheGracefulLimit(_ harness: Harness, _ agent: Process, _ what: String) throws -> Int64 {
        let started = ContinuousClock.now
        try harness.stop(agent)
        let milliseconds = started.duration(to: .now).milliseconds
        print("stop: \(milliseconds) ms from SIGTERM to exit with \(what) in flight")
        #expect(milliseconds < 10_000, "the stop took \(milliseconds) ms")
        #expect(agent.terminationStatus == 0)
        return milliseconds
    }

    @Test func aStopWithALongSimulatedPressInFlightIsBounded() throws {
        let harness = Harness()
        let (_, config, agent, _) = try harness.startPairedAgent()
        let press = try harness.start(
            "replenish-agent", ["press", "button", "--hold", "40", "--config", config], log: "press.log")
        // The agent logs nothing until the button is released: the hold is under way once the command has run
        // for 2 s (it connects in milliseconds) and has not ended (it would only after 40 s).
        let pressed = ContinuousClock.now
        try harness.waitUntil("the hold under way") {
            pressed.duration(to: .now) >= .seconds(2) && press.isRunning
        }
        try stopWithinTheGracefulLimit(harness, agent, "a press --hold 40")
        try harness.waitUntil("the press command to end", timeout: 15) { !press.isRunning }
        #expect(press.terminationStatus != 0, "a press cut short by the stop is not reported as ordered")
    }

    @Test func aStopWithAResetWaitingOnDRSIsBoundedAndTheDeregistrationStaysQueued() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        try harness.injectFault(emulator, path: "/registration", count: 1, #"{"kind":"delay","seconds":40}"#)
        let reset = try harness.start("replenish-agent", ["reset", "--config", config], log: "reset.log")
        try harness.waitUntil("the DELETE to reach DRS") { try deregistrationArrivals(harness, emulator).count == 1 }
        try stopWithinTheGracefulLimit(harness, agent, "a reset waiting on DRS")
        try harness.waitUntil("the reset command to end", timeout: 15) { !reset.isRunning }
        // The local part was done first; the call waits in the queue for the next start.
        #expect(FileManager.default.fileExists(atPath: harness.directory + "/state/deregistration.json"))
        #expect(!FileManager.default.fileExists(atPath: harness.directory + "/state/tokens.json"))
        _ = try harness.startAgent(config: config)
        try harness.waitUntil("the queued deregistration", timeout: 60) {
            !FileManager.default.fileExists(atPath: harness.directory + "/state/deregistration.json")
        }
        #expect(try harness.stats(emulator)["deregistrations"] as? Int ?? 0 >= 1)
        harness.expectNoSecretsInAgentOutput()
    }

    /// #29.3: a refresh that LWA does not answer (a rejected access token makes the agent refresh at once) held
    /// the stop for curl's whole 30 s timeout: it is aborted like any other call, and the pairing is kept.
    @Test func aStopDuringATokenRefreshThatLWADoesNotAnswerIsBounded() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        try harness.injectFault(emulator, path: "/replenish/slot-1", count: 1, #"{"kind":"status","status":401}"#)
        try harness.injectFault(emulator, path: "/auth/o2/token", count: 1, #"{"kind":"delay","seconds":40}"#)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        // The pairing's code grant was the first call to the token endpoint; the refresh is the second.
        try harness.waitUntil("the refresh to reach LWA") {
            try harness.arrivals(emulator, path: "/auth/o2/token").count >= 2
        }
        try stopWithinTheGracefulLimit(harness, agent, "a token refresh LWA does not answer")
        let status = try harness.statusJSON(config: config)
        #expect(status["paired"] as? Bool == true && status["pendingOrders"] as? Int == 1)
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func aStopDuringASlowReplenishCallIsBoundedAndThePressStaysQueued() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        try harness.injectFault(emulator, path: "/replenish/slot-1", count: 1, #"{"kind":"delay","seconds":40}"#)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the replenish call to reach DRS") {
            try !harness.arrivals(emulator, path: "/replenish/slot-1").isEmpty
        }
        try stopWithinTheGracefulLimit(harness, agent, "a slow replenish call")
        #expect(try harness.statusJSON(config: config)["pendingOrders"] as? Int == 1, "the press is kept")
        _ = try harness.startAgent(config: config)
        try harness.waitUntil("the order after the restart", timeout: 90) {
            try harness.statusJSON(config: config)["pendingOrders"] as? Int == 0
        }
        // The delayed first call placed the order when its timer fired; the resend was de-duplicated.
        try harness.waitUntil("DRS to place the order", timeout: 60) { try placed(harness, emulator) == 1 }
        #expect(try placed(harness, emulator) == 1)
        harness.expectNoSecretsInAgentOutput()
    }

    // MARK: - #19.7 and #19.8: reset is all or nothing, and overwrites the tokens

    @Test func aResetWorksAfterAStateFileWasOnceADirectory() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        try harness.stop(agent)
        let outbox = harness.directory + "/state/outbox.json"
        try? FileManager.default.removeItem(atPath: outbox)
        try FileManager.default.createDirectory(atPath: outbox + "/inner", withIntermediateDirectories: true)
        try "x".write(toFile: outbox + "/inner/file", atomically: false, encoding: .utf8)
        _ = try harness.startAgent(config: config)
        try harness.waitUntil("the directory moved aside") {
            try FileManager.default.contentsOfDirectory(atPath: harness.directory + "/state").contains {
                $0.hasPrefix("outbox.json.corrupt-")
            }
        }
        let reset = try harness.run("replenish-agent", ["reset", "--config", config])
        #expect(reset.status == 0, "\(reset.error)")
        #expect(reset.output.contains("deregistered from DRS"), "\(reset.output)")
        let left = try FileManager.default.contentsOfDirectory(atPath: harness.directory + "/state")
        #expect(!left.contains { $0.contains(".corrupt-") }, "\(left)")
        #expect(try harness.stats(emulator)["deregistrations"] as? Int == 1)
        harness.expectNoSecretsInAgentOutput()
    }

    /// A read-only state directory (a read-only bind mount as root, mode 0555 otherwise): the reset refuses
    /// before DRS hears anything, and the device stays paired and ordering.
    @Test func aResetThatCannotWriteLocallyTellsDRSNothing() throws {
        let harness = Harness()
        let (emulator, config, _, _) = try harness.startPairedAgent()
        let state = harness.directory + "/state"
        let asRoot = geteuid() == 0
        if asRoot {
            #expect(try harness.run("/bin/mount", ["--bind", state, state]).status == 0)
            #expect(try harness.run("/bin/mount", ["-o", "remount,bind,ro", state, state]).status == 0)
        } else {
            chmod(state, 0o555)
        }
        defer {
            if asRoot { _ = try? harness.run("/bin/umount", [state]) } else { chmod(state, 0o700) }
        }
        let reset = try harness.run("replenish-agent", ["reset", "--config", config])
        #expect(reset.status != 0)
        #expect(reset.error.contains("DRS was not told"), "\(reset.error)")
        #expect(try harness.stats(emulator)["deregisterCalls"] as? Int == 0)
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == true)
        if asRoot { #expect(try harness.run("/bin/umount", [state]).status == 0) } else { chmod(state, 0o700) }
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the order") { try placed(harness, emulator) == 1 }
        harness.expectNoSecretsInAgentOutput()
    }

    /// The daemon's reset overwrites `tokens.json` with zeros before unlinking it: a descriptor opened before the
    /// reset (the same inode) reads zeros afterwards. (A hard link would not show it: a file with another name is
    /// only unlinked, never overwritten, so a link to a file outside the state directory cannot get it zeroed.)
    @Test func theDaemonsResetOverwritesTheTokens() throws {
        let harness = Harness()
        let (_, config, _, _) = try harness.startPairedAgent()
        let tokens = try #require(FileHandle(forReadingAtPath: harness.directory + "/state/tokens.json"))
        defer { try? tokens.close() }
        let reset = try harness.run("replenish-agent", ["reset", "--config", config])
        #expect(reset.status == 0, "\(reset.error)")
        try tokens.seek(toOffset: 0)
        let bytes = [UInt8](try tokens.readToEnd() ?? Data())
        #expect(!bytes.isEmpty && bytes.allSatisfy { $0 == 0 }, "tokens.json was unlinked without being overwritten")
    }

    // MARK: - #19.9: press reports what happened

    /// The second press of a slot whose order DRS has shipped: the agent asks DRS about the open order first,
    /// and DRS takes 14 s to answer. The press is then ordered, and `press` must say so (exit 0).
    @Test func aPressWhoseOrderRecheckIsSlowReportsTheRealOutcome() throws {
        let harness = Harness()
        let (emulator, config, _, _) = try harness.startPairedAgent()
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the first order") { try placed(harness, emulator) == 1 }
        _ = try harness.emulator(emulator, .post, "/admin/deliver/slot-1")
        try harness.injectFault(emulator, path: "/getOrderInfo", count: 1, #"{"kind":"delay","seconds":14}"#)
        let second = try harness.run("replenish-agent", ["press", "button", "--config", config], timeout: 150)
        try harness.waitUntil("the second order") { try placed(harness, emulator) == 2 }
        #expect(second.status == 0, "press said: \(second.error)")
        #expect(!second.error.contains("no press was recognised"))
        harness.expectNoSecretsInAgentOutput()
    }
}
