import Foundation
import Logging
import Synchronization
import Testing

@testable import ReplenishAgent

/// The order path in-process on a manual clock: the token backoff shared with the order path and the duties,
/// the "sent, answer unknown" mark, writes that fail, and entries that must not be sent.
@Suite(.tags(.unit)) struct OrdersTests {
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
        run: AgentRun = AgentRun(boot: "this-boot", id: "this-run"),
        clockSynchronized: @escaping @Sendable () -> Bool = { false },
        sinceBoot: @escaping @Sendable () -> Double = { 60 }, logger: Logger = .init(label: "test")
    ) throws -> DeliveryLoop<ManualClock> {
        DeliveryLoop(
            book: try OrderBook(
                stateDirectory: directory, run: run, wallTime: wallTime, clockSynchronized: clockSynchronized,
                sinceBoot: sinceBoot, random: .seeded(state: 4), logger: .init(label: "test")),
            slots: slots,
            drs: DRSSession(
                client: DRSClient(http: drs, baseURL: try EndpointURL("http://127.0.0.1:1")), tokens: tokens),
            clock: clock, random: .seeded(state: 3), logger: logger)
    }

    func outboxOnDisk(_ directory: String) throws -> Outbox? {
        try StateFile.load(Outbox.self, from: OrderBook.path(stateDirectory: directory)) { _ in }
    }

    @Test func lwaDownForAnHourWithPressesPendingAsksLWAOnlyOnTheRefreshSchedule() async throws {
        // The schedule alone: the token manager with LWA answering 503 for an hour.
        let alone = ScriptedHTTPClient { _ in json(503, "") }
        let quiet = try tokenManager(alone, store: MemoryTokenStore(tokenSet(expiresAt: epoch - 1)))
        // One caller asks at the start, as the pending presses will below: both schedules start at 0 s.
        _ = try? await quiet.accessToken()
        await StepDriver(clock: clock, quiet.step).pass(.seconds(3600))
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
        let (duties, _) = try Duties.testing(
            drs: drs, tokens: tokens, status: try SubscriptionBook(stateDirectory: directory) { _ in }, slots: slots,
            clock: clock, wallTime: wallTime)
        await StepDriver(clock: clock, tokens.step, orders.step, duties.step).pass(.seconds(3600))
        #expect(clockAtStart.duration(to: clock.now) == .seconds(3600))
        #expect(scheduled >= 8 && scheduled <= 25, "\(scheduled) refreshes in an hour of LWA 503s")
        #expect(busyLWA.requests.count == scheduled)
        #expect(drs.requests.isEmpty, "no DRS call without a token")
        #expect(await orders.book.snapshot.pending.count == 3, "the presses are kept")
    }

    /// The setting of the unanswered-call tests: an outbox in `directory` with two calls that `boot` sent and never
    /// heard answered (slot-1's two days ago, pressed three days ago; slot-2's an hour ago, pressed two hours ago),
    /// a DRS that answers `ORDER_INPROGRESS`, and an access token good for an hour (LWA answers 503).
    func unansweredCalls(in directory: String, boot: String) throws
        -> (drs: ScriptedHTTPClient, tokens: TokenManager<ManualClock>)
    {
        var outbox = Outbox()
        _ = outbox.accept(slot: "slot-1", at: epoch - 3 * 86400)
        outbox.markSending(slot: "slot-1", at: epoch - 2 * 86400, run: AgentRun(boot: boot))
        _ = outbox.accept(slot: "slot-2", at: epoch - 7200)
        outbox.markSending(slot: "slot-2", at: epoch - 3600, run: AgentRun(boot: boot))
        try DiskLane.saveNow(outbox, to: OrderBook.path(stateDirectory: directory))
        let drs = ScriptedHTTPClient { _ in json(200, #"{"detailCode":"ORDER_INPROGRESS"}"#) }
        let tokens = try tokenManager(
            ScriptedHTTPClient { _ in json(503, "") }, store: MemoryTokenStore(tokenSet(expiresAt: epoch + 3600)))
        return (drs, tokens)
    }

    /// #19.2: a call left unanswered during an earlier boot waits, not resent, until the wall clock is known
    /// synchronised (a restored clock makes it look fresh); then it is judged by its age. #29.2: one that the
    /// clock, synchronised or not, already shows over a day old is parked at once (a restored clock is only
    /// ever behind the true time).
    @Test func unansweredCallsOfAnEarlierBootWaitForASynchronisedClock() async throws {
        let directory = temporaryDirectory()
        let (drs, tokens) = try unansweredCalls(in: directory, boot: "boot-before")
        let synchronized = Mutex(false)
        let orders = try orderService(
            directory: directory, drs: drs, tokens: tokens, slots: ["slot-1", "slot-2"],
            run: AgentRun(boot: "boot-now"),
            clockSynchronized: { synchronized.withLock { $0 } })
        let driver = StepDriver(clock: clock, orders.step)
        await driver.pass(.seconds(60))
        #expect(drs.requests.isEmpty, "nothing resent before the clock is synchronised")
        #expect(await orders.book.snapshot.pending.map(\.slot) == ["slot-2"], "the hour-old call waits")
        #expect(try outboxOnDisk(directory)?.entry(for: "slot-1")?.parkedReason?.contains("no answer") == true)
        synchronized.withLock { $0 = true }
        // The next look at the clock (every 5 s) finds it synchronised.
        await driver.pass(DeliveryMachine<ManualClock.Instant>.clockPoll)
        #expect(await orders.book.snapshot.pending.isEmpty)
        #expect(drs.requests.map(\.url) == ["http://127.0.0.1:1/replenish/slot-2"])
    }

    @Test func aCallUnansweredForOverADayIsParkedAndNotSentAgain() async throws {
        let directory = temporaryDirectory()
        let (drs, tokens) = try unansweredCalls(in: directory, boot: "this-boot")
        let orders = try orderService(directory: directory, drs: drs, tokens: tokens, slots: ["slot-1", "slot-2"])
        let driver = StepDriver(clock: clock, orders.step)
        await driver.drain()
        #expect(await orders.book.snapshot.pending.isEmpty)
        // The hour-old unknown call is resent (DRS still de-duplicates it); the two-day-old one is not.
        #expect(drs.requests.map(\.url) == ["http://127.0.0.1:1/replenish/slot-2"])
        let parked = try #require(try outboxOnDisk(directory)?.entry(for: "slot-1"))
        #expect(parked.parkedReason?.contains("no answer") == true)
        // A new press of that button orders again.
        _ = try await orders.accept(slot: "slot-1")
        await driver.drain()
        #expect(drs.requests.count == 2)
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
        let driver = StepDriver(clock: clock, orders.step)
        await driver.drain()
        #expect(drs.requests.count == 1)
        #expect(try outboxOnDisk(directory)?.entry(for: "slot-1")?.unansweredSince == epoch)
        // The first retry comes within the orders backoff's first step.
        await driver.pass(Backoff.orders.ceiling(attempt: 1))
        #expect(drs.requests.count == 2)
        #expect(try outboxOnDisk(directory)?.entry(for: "slot-1")?.unansweredSince == nil)
        #expect(try outboxOnDisk(directory)?.entry(for: "slot-1")?.attempts == 2)
    }

    /// A press marked "sent, answer unknown" in its own write whose entry is parked before its call is tried:
    /// the next press of the slot makes a new entry, marked in its own write again (nothing of the parked
    /// entry's mark is remembered for it).
    @Test func anEntryParkedBeforeItsCallLeavesTakesItsRememberedMarkWithIt() async throws {
        let directory = temporaryDirectory()
        let drs = ScriptedHTTPClient { _ in json(200, #"{"detailCode":"TEST_ORDER_PLACED"}"#) }
        let tokens = try tokenManager(
            ScriptedHTTPClient { _ in json(503, "") }, store: MemoryTokenStore(tokenSet(expiresAt: epoch + 3600)))
        let orders = try orderService(directory: directory, drs: drs, tokens: tokens)
        // A slot the config no longer has: marked with the press, parked at the first step, never sent.
        #expect(try await orders.accept(slot: "slot-gone").kind == .queued)
        #expect(try outboxOnDisk(directory)?.entry(for: "slot-gone")?.unansweredSince == epoch)
        let driver = StepDriver(clock: clock, orders.step)
        await driver.drain()
        #expect(try outboxOnDisk(directory)?.entry(for: "slot-gone")?.parkedReason == "slot no longer configured")
        #expect(drs.requests.isEmpty)
        clock.advance(by: .seconds(10))
        #expect(try await orders.accept(slot: "slot-gone").kind == .queued)
        let replaced = try #require(try outboxOnDisk(directory)?.entry(for: "slot-gone"))
        #expect(replaced.parkedReason == nil)
        #expect(replaced.unansweredSince == epoch + 10)
        #expect(replaced.pressedAt == [epoch + 10])
    }

    /// A press while its slot's call is out, marked with its write (nothing backs the slot off until the answer:
    /// `DeliveryMachine.sendsAtOnce` says yes), remembers no "before the mark" of an entry that carries the call's
    /// mark: a later try's entry before its mark is the last call's, which a call that never left goes back to.
    @Test func aPressWhileACallIsOutRemembersNoMarkThatIsNotItsOwn() async throws {
        let directory = temporaryDirectory()
        let tokens = try tokenManager(
            ScriptedHTTPClient { _ in json(503, "") }, store: MemoryTokenStore(tokenSet(expiresAt: epoch + 3600)))
        let drs = ScriptedHTTPClient { _ in json(503, "") }
        let book = try orderService(directory: directory, drs: drs, tokens: tokens).book
        let markNow = OrderBook.MarkNow(ifQueued: true, ifCoalesced: true)
        _ = try await book.accept(slot: "slot-1", fromSensor: false, pairingId: nil, markNow: markNow)
        // The first try takes the press's mark (at epoch); its call is out when the slot is pressed again.
        _ = try await book.markSending(slot: "slot-1", answeredBefore: false)
        _ = try await book.accept(slot: "slot-1", fromSensor: false, pairingId: nil, markNow: markNow)
        // DRS rejected the token; the try after the refresh marks its own call, which is never answered.
        clock.advance(by: .seconds(10))
        _ = try await book.markSending(slot: "slot-1", answeredBefore: true)
        let before = try #require(try await book.markSending(slot: "slot-1", answeredBefore: false))
        #expect(before.unansweredSince == epoch + 10)
        // That try's call never left: the file says the last call's answer is unknown, since that call.
        try await book.commit { $0.unmarkSending(slot: "slot-1", previous: before) }
        #expect(try outboxOnDisk(directory)?.entry(for: "slot-1")?.unansweredSince == epoch + 10)
    }

    /// The retry line of a try that found no token says the entry's attempts, as every retry line does.
    @Test func theRetryLineOfATryWithoutATokenSaysTheAttempts() async throws {
        let logs = CapturedLogs()
        let tokens = try tokenManager(
            ScriptedHTTPClient { _ in json(503, "") }, store: MemoryTokenStore(tokenSet(expiresAt: epoch - 1)))
        let orders = try orderService(
            directory: temporaryDirectory(), drs: ScriptedHTTPClient { _ in json(503, "") }, tokens: tokens,
            logger: logs.logger)
        _ = try await orders.accept(slot: "slot-1")
        await StepDriver(clock: clock, orders.step).drain()
        let retry = try #require(logs.lines.withLock { $0 }.first { $0.hasPrefix("order not sent yet; will retry") })
        #expect(retry.contains(#""order.attempts": 0"#), "\(retry)")
    }

    @Test func anAcknowledgementThatCannotBeWrittenIsWrittenLaterAndNothingIsSentMeanwhile() async throws {
        let directory = temporaryDirectory()
        let drs = GatedHTTPClient(json(200, #"{"detailCode":"TEST_ORDER_PLACED"}"#))
        let tokens = try tokenManager(
            ScriptedHTTPClient { _ in json(503, "") }, store: MemoryTokenStore(tokenSet(expiresAt: epoch + 3600)))
        let orders = try orderService(directory: directory, drs: drs, tokens: tokens)
        _ = try await orders.accept(slot: "slot-1")
        let sending = Task { await orders.step() }
        await drs.requestArrived()
        // The disk "fills" while the call is out: a directory where the write's temp file must go.
        let obstacle = OrderBook.path(stateDirectory: directory) + ".tmp-\(getpid())"
        try FileManager.default.createDirectory(atPath: obstacle, withIntermediateDirectories: false)
        drs.open()
        _ = await sending.value
        #expect(await orders.book.snapshot.pending.isEmpty)
        // Acknowledged in memory, not on disk: the file still says "sent, answer unknown".
        #expect(try outboxOnDisk(directory)?.entry(for: "slot-1")?.unansweredSince != nil)
        // A press now cannot be made durable, so it is refused (never acknowledged and then lost).
        await #expect(throws: AgentError.self) { try await orders.accept(slot: "slot-1") }
        try FileManager.default.removeItem(atPath: obstacle)
        // The write is retried within the first backoff step (2.5-5 s).
        await StepDriver(clock: clock, orders.step).pass(Backoff.stateWrite.ceiling(attempt: 1))
        #expect(try outboxOnDisk(directory)?.entries.isEmpty == true)
        #expect(drs.requestCount == 1)
    }

    @Test func anEntryForASlotNoLongerConfiguredIsParkedAndShown() async throws {
        let directory = temporaryDirectory()
        var outbox = Outbox()
        _ = outbox.accept(slot: "slot-gone", at: epoch - 60)
        try DiskLane.saveNow(outbox, to: OrderBook.path(stateDirectory: directory))
        let drs = ScriptedHTTPClient { _ in json(200, #"{"detailCode":"TEST_ORDER_PLACED"}"#) }
        let tokens = try tokenManager(
            ScriptedHTTPClient { _ in json(503, "") }, store: MemoryTokenStore(tokenSet(expiresAt: epoch + 3600)))
        let orders = try orderService(directory: directory, drs: drs, tokens: tokens)
        await StepDriver(clock: clock, orders.step).drain()
        #expect(await orders.book.snapshot.parked.count == 1)
        #expect(await orders.book.snapshot.parked.first?.parkedReason == "slot no longer configured")
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
        let (duties, _) = try Duties.testing(
            drs: drs, tokens: tokens, status: try SubscriptionBook(stateDirectory: directory) { _ in },
            slots: ["slot-1"],
            clock: clock, wallTime: wallTime, clockTrusted: { trusted.withLock { $0 } })
        let driver = StepDriver(clock: clock, duties.step)
        await driver.pass(.seconds(120))
        #expect(drs.requests.isEmpty, "no device status with a clock that is not set")
        // NTP sets the clock: device status goes out at the next look at it (every 2 s).
        trusted.withLock { $0 = true }
        await driver.pass(DutyTimeline<ManualClock.Instant>.clockPoll)
        let sent = try #require(drs.requests.first { $0.url.hasSuffix("/deviceStatus") })
        #expect(String(decoding: sent.body ?? [], as: UTF8.self).contains(#""mostRecentlyActiveDate":"2027-"#))
    }

    @Test func aPressMadeUnderAnEarlierPairingIsParkedNeverSent() async throws {
        let directory = temporaryDirectory()
        var outbox = Outbox()
        _ = outbox.accept(slot: "slot-1", at: epoch - 60, pairingId: "previous-owner")
        try DiskLane.saveNow(outbox, to: OrderBook.path(stateDirectory: directory))
        let drs = ScriptedHTTPClient { _ in json(200, #"{"detailCode":"TEST_ORDER_PLACED"}"#) }
        var tokens = tokenSet(expiresAt: epoch + 3600)
        tokens.pairingId = "new-owner"
        let manager = try tokenManager(ScriptedHTTPClient { _ in json(503, "") }, store: MemoryTokenStore(tokens))
        let orders = try orderService(directory: directory, drs: drs, tokens: manager)
        let driver = StepDriver(clock: clock, orders.step)
        await driver.drain()
        #expect(await orders.book.snapshot.parked.count == 1)
        #expect(await orders.book.snapshot.parked.first?.parkedReason == Outbox.earlierPairingReason)
        #expect(drs.requests.isEmpty)
        // The new owner's press replaces it and is ordered.
        _ = try await orders.accept(slot: "slot-1")
        await driver.drain()
        #expect(drs.requests.count == 1)
        #expect(await orders.book.snapshot.entries.isEmpty)
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
