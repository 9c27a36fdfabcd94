import Foundation
import Synchronization
import Testing

@testable import ReplenishAgent

/// The order path in-process on a manual clock: the token backoff shared with the order path and the duties,
/// the "sent, answer unknown" mark, writes that fail, and entries that must not be sent.
@Suite(.tags(.unit)) struct OrderServiceTests {
    let clock = ManualClock()
    let epoch = 1_800_000_000.0

    /// Wall time that moves with the manual clock.
    var wallTime: @Sendable () -> Double { clock.wallTime(from: epoch) }

    func tokenSet(expiresAt: Double) -> TokenSet {
        TokenSet(
            clientId: "client", refreshToken: Secret("Atzr|r"), accessToken: Secret("Atza|a"),
            accessTokenExpiresAt: expiresAt, accessTokenLifetime: 3600)
    }

    func tokenManager(_ lwa: ScriptedHTTPClient, store: MemoryTokenStore, seed: UInt64 = 21) throws
        -> TokenManager<ManualClock>
    {
        try TokenManager(
            store: store,
            lwa: LWAClient(
                http: lwa, tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil),
            clock: clock, wallTime: wallTime, random: .seeded(state: seed), logger: .init(label: "test"))
    }

    func orderService(
        directory: String, drs: any HTTPClient, tokens: TokenManager<ManualClock>, slots: [String] = ["slot-1"],
        boot: String? = nil, clockSynchronized: @escaping @Sendable () -> Bool = { false }
    ) throws -> OrderService<ManualClock> {
        try OrderService(
            stateDirectory: directory, slots: slots,
            drs: DRSSession(
                client: DRSClient(http: drs, baseURL: try EndpointURL("http://127.0.0.1:1")), tokens: tokens),
            tokens: tokens,
            status: try StatusBook(stateDirectory: directory) { _ in }, clock: clock, wallTime: wallTime,
            random: .seeded(state: 3), boot: boot, clockSynchronized: clockSynchronized, logger: .init(label: "test"))
    }

    /// Moves the manual clock forward a second at a time; after each step waits (bounded, 5 s of real time at
    /// most, polling) until `sleepers` tasks are asleep on the clock again, so every service has finished what
    /// the step made due (file writes included) before time moves on.
    func pass(seconds: Int, sleepers: Int = 1, step: Int = 1) async {
        for _ in 0..<(seconds / step) {
            clock.advance(by: .seconds(step))
            await quiesce(sleepers: sleepers)
        }
    }

    func quiesce(sleepers: Int) async {
        let deadline = ContinuousClock.now.advanced(by: .seconds(5))
        var stable = 0
        while ContinuousClock.now < deadline {
            // Several polls in a row at the count: a service that woke may not have gone back to sleep yet.
            stable = clock.sleeperCount >= sleepers ? stable + 1 : 0
            if stable >= 20 { return }
            await Task.yield()
            if stable == 0 { try? await Task.sleep(for: .milliseconds(1)) }
        }
    }

    func outboxOnDisk(_ directory: String) throws -> Outbox? {
        try StateFile.load(Outbox.self, from: OrderService<ManualClock>.path(stateDirectory: directory)) { _ in }
    }

    @Test func lwaDownForAnHourWithPressesPendingAsksLWAOnlyOnTheRefreshSchedule() async throws {
        // The schedule alone: the token manager with LWA answering 503 for an hour.
        let alone = ScriptedHTTPClient { _ in json(503, "") }
        let quiet = try tokenManager(alone, store: MemoryTokenStore(tokenSet(expiresAt: epoch - 1)))
        let quietRunner = Task { await quiet.run() }
        // One caller asks at the start, as the pending presses will below: both schedules start at 0 s.
        _ = try? await quiet.accessToken()
        await quiesce(sleepers: 1)
        await pass(seconds: 3600, sleepers: 1, step: 5)
        quietRunner.cancel()
        let scheduled = alone.requests.count

        // The same, with presses for three slots pending and the duties running: not one LWA request more.
        let busyLWA = ScriptedHTTPClient { _ in json(503, "") }
        let drs = ScriptedHTTPClient { _ in json(200, #"{"detailCode":"TEST_ORDER_PLACED"}"#) }
        let directory = temporaryDirectory()
        let clockAtStart = clock.now
        let tokens = try tokenManager(busyLWA, store: MemoryTokenStore(tokenSet(expiresAt: wallTime() - 1)))
        let slots = ["slot-1", "slot-2", "slot-3"]
        let orders = try orderService(directory: directory, drs: drs, tokens: tokens, slots: slots)
        for slot in slots { _ = try await orders.accept(slot: slot) }
        let duties = Duties(
            drs: DRSSession(
                client: DRSClient(http: drs, baseURL: try EndpointURL("http://127.0.0.1:1")), tokens: tokens),
            tokens: tokens,
            status: try StatusBook(stateDirectory: directory) { _ in }, slots: slots, clock: clock,
            wallTime: wallTime, logger: .init(label: "test"))
        let runners = [
            Task { await tokens.run() }, Task { await orders.run() }, Task { await duties.run() },
        ]
        // The token manager, the order service and the duties each sleep on the clock between their tries.
        await quiesce(sleepers: 3)
        await pass(seconds: 3600, sleepers: 3, step: 5)
        for runner in runners { runner.cancel() }
        #expect(clockAtStart.duration(to: clock.now) == .seconds(3600))
        #expect(scheduled >= 8 && scheduled <= 25, "\(scheduled) refreshes in an hour of LWA 503s")
        #expect(busyLWA.requests.count == scheduled)
        #expect(drs.requests.isEmpty, "no DRS call without a token")
        #expect(await orders.snapshot.pending.count == 3, "the presses are kept")
    }

    /// #19.2: calls left unanswered during an earlier boot wait, neither resent nor parked, until the wall clock
    /// is known synchronised (a restored clock makes them look fresh); then they are judged by their age.
    @Test func unansweredCallsOfAnEarlierBootWaitForASynchronisedClock() async throws {
        let directory = temporaryDirectory()
        var outbox = Outbox()
        _ = outbox.accept(slot: "slot-1", at: epoch - 3 * 86400)
        outbox.markSending(slot: "slot-1", at: epoch - 2 * 86400, boot: "boot-before")
        _ = outbox.accept(slot: "slot-2", at: epoch - 7200)
        outbox.markSending(slot: "slot-2", at: epoch - 3600, boot: "boot-before")
        try StateFile.save(outbox, to: OrderService<ManualClock>.path(stateDirectory: directory))
        let drs = ScriptedHTTPClient { _ in json(200, #"{"detailCode":"ORDER_INPROGRESS"}"#) }
        let tokens = try tokenManager(
            ScriptedHTTPClient { _ in json(503, "") }, store: MemoryTokenStore(tokenSet(expiresAt: epoch + 3600)))
        let synchronized = Mutex(false)
        let orders = try orderService(
            directory: directory, drs: drs, tokens: tokens, slots: ["slot-1", "slot-2"], boot: "boot-now",
            clockSynchronized: { synchronized.withLock { $0 } })
        let runner = Task { await orders.run() }
        defer { runner.cancel() }
        await pass(seconds: 60, step: 5)
        #expect(drs.requests.isEmpty, "nothing resent before the clock is synchronised")
        #expect(await orders.snapshot.pending.count == 2, "nothing parked either")
        synchronized.withLock { $0 = true }
        await pass(seconds: 10, step: 5)
        #expect(await settle({ await orders.snapshot.pending.isEmpty }))
        #expect(drs.requests.map(\.url) == ["http://127.0.0.1:1/replenish/slot-2"])
        #expect(try outboxOnDisk(directory)?.entry(for: "slot-1")?.parkedReason?.contains("no answer") == true)
    }

    @Test func aCallUnansweredForOverADayIsParkedAndNotSentAgain() async throws {
        let directory = temporaryDirectory()
        var outbox = Outbox()
        _ = outbox.accept(slot: "slot-1", at: epoch - 3 * 86400)
        outbox.markSending(slot: "slot-1", at: epoch - 2 * 86400)
        _ = outbox.accept(slot: "slot-2", at: epoch - 7200)
        outbox.markSending(slot: "slot-2", at: epoch - 3600)
        try StateFile.save(outbox, to: OrderService<ManualClock>.path(stateDirectory: directory))
        let drs = ScriptedHTTPClient { _ in json(200, #"{"detailCode":"ORDER_INPROGRESS"}"#) }
        let tokens = try tokenManager(
            ScriptedHTTPClient { _ in json(503, "") }, store: MemoryTokenStore(tokenSet(expiresAt: epoch + 3600)))
        let orders = try orderService(directory: directory, drs: drs, tokens: tokens, slots: ["slot-1", "slot-2"])
        let runner = Task { await orders.run() }
        defer { runner.cancel() }
        #expect(await settle({ await orders.snapshot.pending.isEmpty }))
        // The hour-old unknown call is resent (DRS still de-duplicates it); the two-day-old one is not.
        #expect(drs.requests.map(\.url) == ["http://127.0.0.1:1/replenish/slot-2"])
        let parked = try #require(try outboxOnDisk(directory)?.entry(for: "slot-1"))
        #expect(parked.parkedReason?.contains("no answer") == true)
        // A new press of that button orders again.
        _ = try await orders.accept(slot: "slot-1")
        #expect(await settle({ drs.requests.count == 2 }))
    }

    @Test func theUnknownMarkIsOnDiskWhileNoAnswerCameAndClearedByAnAnswer() async throws {
        let directory = temporaryDirectory()
        let answers = Mutex([AgentError(.network, "connection dropped")] as [AgentError])
        let drs = ScriptedHTTPClient { _ throws(AgentError) in
            if let error = answers.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { throw error }
            return json(503, "")
        }
        let tokens = try tokenManager(
            ScriptedHTTPClient { _ in json(503, "") }, store: MemoryTokenStore(tokenSet(expiresAt: epoch + 3600)))
        let orders = try orderService(directory: directory, drs: drs, tokens: tokens)
        _ = try await orders.accept(slot: "slot-1")
        let runner = Task { await orders.run() }
        defer { runner.cancel() }
        #expect(await settle({ drs.requests.count == 1 && clock.sleeperCount > 0 }))
        #expect(try outboxOnDisk(directory)?.entry(for: "slot-1")?.unansweredSince == epoch)
        await pass(seconds: 2)
        #expect(await settle({ drs.requests.count == 2 && clock.sleeperCount > 0 }))
        #expect(try outboxOnDisk(directory)?.entry(for: "slot-1")?.unansweredSince == nil)
        #expect(try outboxOnDisk(directory)?.entry(for: "slot-1")?.attempts == 2)
    }

    @Test func anAcknowledgementThatCannotBeWrittenIsWrittenLaterAndNothingIsSentMeanwhile() async throws {
        let directory = temporaryDirectory()
        let drs = GatedHTTPClient(json(200, #"{"detailCode":"TEST_ORDER_PLACED"}"#))
        let tokens = try tokenManager(
            ScriptedHTTPClient { _ in json(503, "") }, store: MemoryTokenStore(tokenSet(expiresAt: epoch + 3600)))
        let orders = try orderService(directory: directory, drs: drs, tokens: tokens)
        _ = try await orders.accept(slot: "slot-1")
        let runner = Task { await orders.run() }
        defer { runner.cancel() }
        #expect(await settle({ drs.requestCount == 1 }))
        // The disk "fills" while the call is out: a directory where the write's temp file must go.
        let obstacle = OrderService<ManualClock>.path(stateDirectory: directory) + ".tmp-\(getpid())"
        try FileManager.default.createDirectory(atPath: obstacle, withIntermediateDirectories: false)
        drs.open()
        #expect(await settle({ await orders.snapshot.pending.isEmpty }))
        // Acknowledged in memory, not on disk: the file still says "sent, answer unknown".
        #expect(try outboxOnDisk(directory)?.entry(for: "slot-1")?.unansweredSince != nil)
        // A press now cannot be made durable, so it is refused (never acknowledged and then lost).
        await #expect(throws: AgentError.self) { try await orders.accept(slot: "slot-1") }
        try FileManager.default.removeItem(atPath: obstacle)
        // The write is retried within the first backoff step (2.5-5 s).
        var written = false
        for _ in 0..<10 where !written {
            clock.advance(by: .seconds(1))
            written = await settle({ (try? outboxOnDisk(directory)?.entries.isEmpty) == true }, attempts: 500)
        }
        #expect(written)
        #expect(drs.requestCount == 1)
    }

    @Test func anEntryForASlotNoLongerConfiguredIsParkedAndShown() async throws {
        let directory = temporaryDirectory()
        var outbox = Outbox()
        _ = outbox.accept(slot: "slot-gone", at: epoch - 60)
        try StateFile.save(outbox, to: OrderService<ManualClock>.path(stateDirectory: directory))
        let drs = ScriptedHTTPClient { _ in json(200, #"{"detailCode":"TEST_ORDER_PLACED"}"#) }
        let tokens = try tokenManager(
            ScriptedHTTPClient { _ in json(503, "") }, store: MemoryTokenStore(tokenSet(expiresAt: epoch + 3600)))
        let orders = try orderService(directory: directory, drs: drs, tokens: tokens)
        let runner = Task { await orders.run() }
        defer { runner.cancel() }
        #expect(await settle({ await orders.snapshot.parked.count == 1 }))
        #expect(await orders.snapshot.parked.first?.parkedReason == "slot no longer configured")
        #expect(drs.requests.isEmpty)
    }

    @Test func withTheWallClockNotSetNothingDatedIsSentAndTheStoredExpiryIsNotBelieved() async throws {
        let directory = temporaryDirectory()
        let trusted = Mutex(false)
        let drs = ScriptedHTTPClient { request in
            request.url.hasSuffix("/subscriptionInfo")
                ? json(200, #"{"slotsSubscriptionStatus":{"slot-1":true}}"#) : json(200, "{}")
        }
        let lwa = ScriptedHTTPClient { _ in
            json(200, #"{"access_token":"Atza|new","token_type":"bearer","expires_in":3600}"#)
        }
        // The stored token looks valid for an hour by the (unset) clock: it is refreshed all the same.
        let tokens = try TokenManager(
            store: MemoryTokenStore(tokenSet(expiresAt: epoch + 3600)),
            lwa: LWAClient(
                http: lwa, tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil),
            clock: clock, wallTime: wallTime, clockTrusted: false, logger: .init(label: "test"))
        #expect(try await tokens.accessToken() == Secret("Atza|new"))
        #expect(lwa.requests.count == 1)
        let duties = Duties(
            drs: DRSSession(
                client: DRSClient(http: drs, baseURL: try EndpointURL("http://127.0.0.1:1")), tokens: tokens),
            tokens: tokens,
            status: try StatusBook(stateDirectory: directory) { _ in }, slots: ["slot-1"], clock: clock,
            wallTime: wallTime, clockTrusted: { trusted.withLock { $0 } }, logger: .init(label: "test"))
        let runner = Task { await duties.run() }
        defer { runner.cancel() }
        await pass(seconds: 120)
        #expect(drs.requests.isEmpty, "no device status with a clock that is not set")
        // NTP sets the clock: device status goes out within seconds.
        trusted.withLock { $0 = true }
        await pass(seconds: 3)
        let sent = try #require(drs.requests.first { $0.url.hasSuffix("/deviceStatus") })
        #expect(String(decoding: sent.body ?? [], as: UTF8.self).contains(#""mostRecentlyActiveDate":"2027-"#))
    }

    @Test func aPressMadeUnderAnEarlierPairingIsParkedNeverSent() async throws {
        let directory = temporaryDirectory()
        var outbox = Outbox()
        _ = outbox.accept(slot: "slot-1", at: epoch - 60, pairingId: "previous-owner")
        try StateFile.save(outbox, to: OrderService<ManualClock>.path(stateDirectory: directory))
        let drs = ScriptedHTTPClient { _ in json(200, #"{"detailCode":"TEST_ORDER_PLACED"}"#) }
        var tokens = tokenSet(expiresAt: epoch + 3600)
        tokens.pairingId = "new-owner"
        let manager = try tokenManager(ScriptedHTTPClient { _ in json(503, "") }, store: MemoryTokenStore(tokens))
        let orders = try orderService(directory: directory, drs: drs, tokens: manager)
        let runner = Task { await orders.run() }
        defer { runner.cancel() }
        #expect(await settle({ await orders.snapshot.parked.count == 1 }))
        #expect(await orders.snapshot.parked.first?.parkedReason == Outbox.earlierPairingReason)
        #expect(drs.requests.isEmpty)
        // The new owner's press replaces it and is ordered.
        _ = try await orders.accept(slot: "slot-1")
        #expect(await settle({ drs.requests.count == 1 }))
        #expect(await orders.snapshot.entries.isEmpty)
    }

    @Test func aPairingTagsItsPressesAndAnUpgradedTokenFileWithoutATagKeepsItsPresses() throws {
        var outbox = Outbox()
        // Files from before tags: no tag on either side still matches (the upgrade loses no press).
        _ = outbox.accept(slot: "a", at: 1)
        #expect(outbox.parkStale(now: epoch, configuredSlots: ["a"], pairingId: .some(nil)).isEmpty)
        #expect(outbox.parkStale(now: epoch, configuredSlots: ["a"], pairingId: .none).isEmpty)
        #expect(outbox.parkStale(now: epoch, configuredSlots: ["a"], pairingId: "t2").map(\.slot) == ["a"])
    }
}
