import Synchronization
import Testing

@testable import ReplenishAgent

/// The one deregistration path on a manual clock: a queued call waits for its caller's local part, and no
/// `DELETE /registration` comes sooner than the backoff after the one before, whoever asks.
@Suite(.tags(.unit)) struct DeregistrationQueueTests {
    let clock = ManualClock()

    /// A queue whose DRS answers `drsStatus` to every DELETE; LWA grants a rotated refresh token each time.
    func queue(drsStatus: Int) throws -> (DeregistrationQueue<ManualClock>, ScriptedHTTPClient, String) {
        let directory = temporaryDirectory()
        let grants = Mutex(0)
        let lwaHTTP = ScriptedHTTPClient { _ in
            let number = grants.withLock {
                $0 += 1
                return $0
            }
            return json(
                200, #"{"access_token":"Atza|a\#(number)","refresh_token":"Atzr|r\#(number)","expires_in":3600}"#)
        }
        let drsHTTP = ScriptedHTTPClient { _ in json(drsStatus, "{}") }
        let lwa = LWAClient(
            http: lwaHTTP, tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil)
        let drs = DRSClient(http: drsHTTP, baseURL: try EndpointURL("http://127.0.0.1:1"))
        let queue = DeregistrationQueue(
            stateDirectory: directory, lwa: lwa, drs: drs, clock: clock, logger: .init(label: "test"))
        return (queue, drsHTTP, directory)
    }

    func deletes(_ drs: ScriptedHTTPClient) -> Int { drs.requests.filter { $0.method == .delete }.count }

    /// A queue with the old pairing's call queued (its refresh token `Atzr|old`), and the driver of its steps.
    func queued(drsStatus: Int) async throws
        -> (DeregistrationQueue<ManualClock>, StepDriver, ScriptedHTTPClient, String)
    {
        let (queue, drs, directory) = try queue(drsStatus: drsStatus)
        try await queue.enqueue(.init(refreshToken: Secret("Atzr|old"), clientId: "client"))
        return (queue, StepDriver(clock: clock, queue.step), drs, directory)
    }

    @Test func aQueuedCallWaitsForItsCallerAndATryInsideTheBackoffSendsNothing() async throws {
        let (queue, driver, drs, directory) = try await queued(drsStatus: 503)
        // The caller's local part takes long on a loaded device: the queue does not go ahead of it.
        await driver.pass(DeregistrationTimeline<ManualClock.Instant>.callerGrace - .seconds(1))
        #expect(deletes(drs) == 0)
        // The caller's one try now: DRS answers 503, and the pending call keeps the rotated refresh token.
        #expect(await queue.tryNow(accessToken: nil)?.code == .server)
        #expect(deletes(drs) == 1)
        let kept = try StateFile.load(
            PendingDeregistration.self, from: DeregistrationQueue<ManualClock>.path(stateDirectory: directory)
        ) { _ in }
        #expect(kept?.refreshToken == Secret("Atzr|r1"))
        // Asked again at once: the backoff holds, nothing is sent, the reason is the last failure's.
        #expect(await queue.tryNow(accessToken: nil)?.code == .server)
        #expect(deletes(drs) == 1)
        // The queue retries on its own after the backoff (at least 1 s, at most the first ceiling).
        await driver.pass(Backoff.floor - .milliseconds(1))
        #expect(deletes(drs) == 1)
        await driver.pass(Backoff.duties.ceiling(attempt: 1))
        #expect(deletes(drs) == 2)
    }

    @Test func aCallerThatNeverComesBackDoesNotStrandTheCall() async throws {
        let (_, driver, drs, directory) = try await queued(drsStatus: 204)
        await driver.pass(DeregistrationTimeline<ManualClock.Instant>.callerGrace - .milliseconds(1))
        #expect(deletes(drs) == 0)
        await driver.pass(.milliseconds(1))
        #expect(deletes(drs) == 1)
        let path = DeregistrationQueue<ManualClock>.path(stateDirectory: directory)
        #expect(try POSIX.status(path) == nil)
    }
}
