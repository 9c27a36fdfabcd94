import Foundation
import Testing

@testable import ReplenishAgent

/// A reset or `deregister` cut short between its steps (a SIGKILL or a power cut; here a step whose file
/// cannot be removed) is finished at the next start, before any state is read, and the queued deregistration
/// stays.
@Suite(.tags(.unit)) struct ResetWipeTests {
    let clock = ManualClock()
    let epoch = 1_800_000_000.0

    var wallTime: @Sendable () -> Double { clock.wallTime(from: epoch) }

    var state: (directory: String, outbox: String) {
        let directory = temporaryDirectory()
        return (directory, OrderBook.path(stateDirectory: directory))
    }

    /// A paired device (`Atzr|r` in `tokens.json`) with a press queued, a subscribed slot and an order in its
    /// history; and the reset over it. LWA and DRS answer 503 (the tests stop the reset before it asks them).
    func pairedWithAQueuedPress(_ directory: String) async throws -> FactoryReset<ManualClock> {
        let store = FileTokenStore(stateDirectory: directory)
        try await store.save(
            TokenSet(
                clientId: "client", refreshToken: Secret("Atzr|r"), accessToken: Secret("Atza|a"),
                accessTokenExpiresAt: epoch + 3600, accessTokenLifetime: 3600))
        let unanswered = ScriptedHTTPClient { _ in json(503, "") }
        let lwa = LWAClient(
            http: unanswered, tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil)
        let drs = DRSClient(http: unanswered, baseURL: try EndpointURL("http://127.0.0.1:1"))
        let tokens = try TokenManager(
            store: store, lwa: lwa, clock: clock, wallTime: wallTime, random: .seeded(state: 1),
            logger: .init(label: "test"))
        // A status file of a build before issue 30, with the order history in it: the start moves the history
        // into outbox.json (`OrderBook.movingLegacyOrders`).
        try #"""
        {"version":1,"slots":{"slot-1":{"subscribed":true}},"orders":[{"slot":"slot-1","detailCode":"STANDARD_ORDER_PLACED","eventInstanceId":"e1","answeredAt":\#(epoch - 60),"open":true}]}
        """#.write(toFile: SubscriptionBook.path(stateDirectory: directory), atomically: true, encoding: .utf8)
        let status = try SubscriptionBook(stateDirectory: directory) { _ in }
        let orders = DeliveryLoop(
            book: try OrderBook(
                stateDirectory: directory, run: .unknown, wallTime: wallTime, clockSynchronized: { true },
                logger: .init(label: "test")),
            slots: ["slot-1"], drs: DRSSession(client: drs, tokens: tokens), clock: clock, random: .seeded(state: 2),
            logger: .init(label: "test"))
        _ = try await orders.accept(slot: "slot-1")
        let queue = DeregistrationQueue(
            stateDirectory: directory, lwa: lwa, drs: drs, clock: clock, logger: .init(label: "test"))
        return FactoryReset(
            stateDirectory: directory, tokens: tokens, orders: orders, subscriptionBook: status, deregistration: queue,
            logger: .init(label: "test"))
    }

    /// Makes the removal of `outbox.json` fail (a directory with a file in it takes its name) until `restore`:
    /// the reset stops right after it removed `tokens.json`, where a SIGKILL at that unlink would leave it.
    func blockOutbox(_ outbox: String) throws -> () throws -> Void {
        let kept = outbox + ".kept"
        try FileManager.default.moveItem(atPath: outbox, toPath: kept)
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: false)
        try "x".write(toFile: outbox + "/x", atomically: false, encoding: .utf8)
        return {
            try FileManager.default.removeItem(atPath: outbox)
            try FileManager.default.moveItem(atPath: kept, toPath: outbox)
        }
    }

    func pendingOnDisk(_ outbox: String) throws -> Int {
        try StateFile.load(Outbox.self, from: outbox) { _ in }?.pending.count ?? 0
    }

    func queuedDeregistration(_ directory: String) throws -> PendingDeregistration? {
        try StateFile.load(
            PendingDeregistration.self, from: DeregistrationQueue<ManualClock>.path(stateDirectory: directory)
        ) { _ in }
    }

    @Test(arguments: [FactoryReset<ManualClock>.Scope.everything, .pairing])
    func aResetCutShortAfterTheTokensWentIsFinishedAtTheNextStartKeepingTheDeregistration(
        scope: FactoryReset<ManualClock>.Scope
    ) async throws {
        let (directory, outbox) = state
        let reset = try await pairedWithAQueuedPress(directory)
        let restore = try blockOutbox(outbox)
        let result = await reset.perform(reason: "test", scope: scope)
        #expect(throws: AgentError.self) { try result.get() }
        try restore()
        // Where the reset stopped: the pairing is gone, the old owner's press and status are still there.
        #expect(!FileManager.default.fileExists(atPath: directory + "/tokens.json"))
        #expect(try pendingOnDisk(outbox) == 1)

        // The next start, before it reads any state.
        let lock = try StateDirectory.open(directory) { _ in }
        defer { _ = lock }
        #expect(try pendingOnDisk(outbox) == 0, "the previous owner's press is left queued")
        #expect(try queuedDeregistration(directory)?.refreshToken == Secret("Atzr|r"))
        let status = try StateFile.load(SubscriptionRecord.self, from: SubscriptionBook.path(stateDirectory: directory))
        { _ in }
        switch scope {
        case .everything:
            #expect(status == nil, "status.json is left")
        case .pairing:
            // `deregister` keeps the order history for the owner to read, and forgets the account's part.
            #expect(status?.slots["slot-1"]?.subscribed == nil)
            let history = try StateFile.load(Outbox.self, from: outbox) { _ in }?.orders
            #expect(history?.map(\.open) == [false, false])
            // The old owner's queued press is in the history as not sent, with the reason (#40.10).
            #expect(history?.last?.detailCode == OrderRecord.notSent)
            #expect(history?.last?.droppedReason?.hasPrefix("the pairing was reset") == true)
        }
        // Finished once: nothing of the wipe is left to do at the start after.
        let names = try POSIX.directoryEntries(directory).filter { !["lock", "deregistration.json"].contains($0) }
        #expect(names == (scope == .pairing ? ["outbox.json", "status.json"] : []))
    }

    /// The daemon's wipe stopped (an I/O error), and the customer paired again before the next start: the mark
    /// names the pairing it was for, and a token file of another pairing is kept (only the mark goes).
    @Test func aWipeCutShortBeforeANewPairingKeepsTheNewPairing() async throws {
        let (directory, _) = state
        try await FileTokenStore(stateDirectory: directory).save(
            TokenSet(
                clientId: "client", refreshToken: Secret("Atzr|new"), accessToken: Secret("Atza|new"),
                accessTokenExpiresAt: epoch + 3600, accessTokenLifetime: 3600, pairingId: "new-pairing"))
        try ResetWipe.begin(.everything, pairingId: "old-pairing", stateDirectory: directory)
        let lock = try StateDirectory.open(directory) { _ in }
        defer { _ = lock }
        #expect(try FileTokenStore(stateDirectory: directory).load()?.pairingId == "new-pairing")
        #expect(!FileManager.default.fileExists(atPath: ResetWipe.markPath(stateDirectory: directory)))
        #expect(try queuedDeregistration(directory) == nil, "the new pairing is not deregistered")
        // The same mark over the pairing it was for still finishes the wipe.
        try ResetWipe.begin(.everything, pairingId: "new-pairing", stateDirectory: directory)
        try ResetWipe.finishInterrupted(stateDirectory: directory) { _ in }
        #expect(try FileTokenStore(stateDirectory: directory).load() == nil)
        #expect(try queuedDeregistration(directory)?.refreshToken == Secret("Atzr|new"))
    }

    @Test func anOfflineResetCutShortIsFinishedAtTheNextStart() async throws {
        let (directory, outbox) = state
        _ = try await pairedWithAQueuedPress(directory)
        let restore = try blockOutbox(outbox)
        #expect(throws: AgentError.self) { try FactoryReset<ManualClock>.performOffline(stateDirectory: directory) }
        try restore()
        #expect(try pendingOnDisk(outbox) == 1)

        let lock = try StateDirectory.open(directory) { _ in }
        defer { _ = lock }
        #expect(try pendingOnDisk(outbox) == 0, "the previous owner's press is left queued")
        #expect(try queuedDeregistration(directory)?.refreshToken == Secret("Atzr|r"))
        #expect(!FileManager.default.fileExists(atPath: SubscriptionBook.path(stateDirectory: directory)))
    }
}
