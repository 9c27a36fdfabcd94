import Foundation
import Synchronization
import Testing

@testable import ReplenishAgent

/// Issue #29.1 and #29.2: the boot is known under the unit's sandbox (its /proc hides the kernel's boot id), an
/// unknown boot is another boot, and an earlier boot's unanswered call waits for the clock at most a day of
/// this boot, while a press of this boot orders at once.
@Suite(.tags(.unit)) struct RestoredClockTests {
    let clock = ManualClock()
    let epoch = 1_800_000_000.0
    var wallTime: @Sendable () -> Double { clock.wallTime(from: epoch) }

    // MARK: - The boot (#29.1)

    @Test func theFirstStartOfABootMarksItAndEveryLaterStartAndCommandReadsTheMark() throws {
        let runtime = temporaryDirectory() + "/run"
        let hidden = temporaryDirectory() + "/no-such-boot-id"
        var words: [UInt64] = [0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210]
        let first = BootIdentity.current(runtimeDirectory: runtime, create: true, kernelPath: hidden) {
            words.removeFirst()
        }
        #expect(first == "01234567-89ab-cdef-fedc-ba9876543210")
        // The directory is made 0700: the unit's RuntimeDirectoryMode= is 0700 too.
        #expect(try POSIX.status(runtime)?.permissions == 0o700)
        let again = BootIdentity.current(runtimeDirectory: runtime, create: true, kernelPath: hidden) { 0 }
        #expect(again == first, "a restart in the same boot")
        #expect(BootIdentity.current(runtimeDirectory: runtime, create: false, kernelPath: hidden) == first)
        // A boot empties the runtime directory (a tmpfs): a new mark, another boot.
        try POSIX.unlinkEntry(runtime + "/" + BootIdentity.markerName)
        let next = BootIdentity.current(runtimeDirectory: runtime, create: true, kernelPath: hidden) { 7 }
        #expect(next != nil && next != first)
    }

    @Test func theKernelsBootIdIsMarkedWhenItCanBeRead() throws {
        let directory = temporaryDirectory()
        let kernel = directory + "/boot_id"
        try "c41db968-083f-44ea-88a5-d7cb61c08763\n".write(toFile: kernel, atomically: true, encoding: .utf8)
        let runtime = directory + "/run"
        #expect(
            BootIdentity.current(runtimeDirectory: runtime, create: false, kernelPath: kernel)
                == "c41db968-083f-44ea-88a5-d7cb61c08763")
        #expect(!POSIX.exists(runtime), "a command makes no mark")
        let id = BootIdentity.current(runtimeDirectory: runtime, create: true, kernelPath: kernel) { 1 }
        #expect(id == "c41db968-083f-44ea-88a5-d7cb61c08763")
        // Under the sandbox later in the same boot, the mark says the same.
        #expect(BootIdentity.current(runtimeDirectory: runtime, create: true, kernelPath: directory + "/x") == id)
    }

    @Test func withoutARuntimeDirectoryTheKernelsIdOrNoneIsUsed() throws {
        let directory = temporaryDirectory()
        try "file".write(toFile: directory + "/file", atomically: true, encoding: .utf8)
        let unusable = directory + "/file/run"
        #expect(BootIdentity.current(runtimeDirectory: unusable, create: true, kernelPath: directory + "/x") == nil)
        let kernel = directory + "/boot_id"
        try "abc-123\n".write(toFile: kernel, atomically: true, encoding: .utf8)
        #expect(BootIdentity.current(runtimeDirectory: unusable, create: true, kernelPath: kernel) == "abc-123")
    }

    @Test func aMarkThatIsNotAnIdIsNotBelieved() throws {
        let runtime = temporaryDirectory()
        try "not an id; rm -rf\n".write(
            toFile: runtime + "/" + BootIdentity.markerName, atomically: true, encoding: .utf8)
        #expect(BootIdentity.current(runtimeDirectory: runtime, create: false, kernelPath: runtime + "/x") == nil)
        let made = BootIdentity.current(runtimeDirectory: runtime, create: true, kernelPath: runtime + "/x") { 5 }
        #expect(made == "00000000-0000-0005-0000-000000000005")
    }

    /// The sandbox hid the boot id in both boots (`nil` then and now): that is no proof of the same boot. But
    /// a mark of the running agent (its run's id) is of this boot whatever is hidden (#40.1).
    @Test func anUnknownBootIsAnotherBootUnlessTheMarkIsThisRunsOwn() {
        var outbox = Outbox()
        _ = outbox.accept(slot: "s", at: epoch)
        outbox.markSending(slot: "s", at: epoch, run: AgentRun(boot: nil, id: "run-1"))
        let entry = outbox.entry(for: "s")!
        #expect(!Outbox.waitsForClock(entry, run: AgentRun(boot: nil, id: "run-1"), clockSynchronized: false))
        #expect(Outbox.waitsForClock(entry, run: AgentRun(boot: nil, id: "run-2"), clockSynchronized: false))
        #expect(Outbox.waitsForClock(entry, run: AgentRun(boot: "b", id: "run-2"), clockSynchronized: false))
        #expect(Outbox.waitsForClock(entry, run: .unknown, clockSynchronized: false))
        #expect(!Outbox.waitsForClock(entry, run: .unknown, clockSynchronized: true))
        var known = Outbox()
        _ = known.accept(slot: "s", at: epoch)
        known.markSending(slot: "s", at: epoch, run: AgentRun(boot: "b", id: "run-1"))
        let marked = known.entry(for: "s")!
        #expect(!Outbox.waitsForClock(marked, run: AgentRun(boot: "b", id: "run-2"), clockSynchronized: false))
        #expect(Outbox.waitsForClock(marked, run: AgentRun(boot: nil, id: "run-2"), clockSynchronized: false))
    }

    /// The first call whose answer is unknown keeps its marks through the resends: its age counts (#40.2).
    @Test func aResendKeepsTheFirstCallsMarks() {
        var outbox = Outbox()
        _ = outbox.accept(slot: "s", at: epoch)
        outbox.markSending(slot: "s", at: epoch, run: AgentRun(boot: "a", id: "run-1"), uptime: 100)
        outbox.markSending(slot: "s", at: epoch + 50, run: AgentRun(boot: "b", id: "run-2"), uptime: 20)
        let entry = outbox.entry(for: "s")!
        #expect(entry.unansweredSince == epoch && entry.unansweredUptime == 100)
        #expect(entry.unansweredBoot == "a" && entry.unansweredRun == "run-1")
    }

    /// #40.2: the age of a call of this boot comes from CLOCK_BOOTTIME, not from a wall clock that stepped: the
    /// clock moved 3 days forward a second after the call (a restored clock set right), the call is a second
    /// old. A call of another boot is still judged by the wall clock.
    @Test func aCallOfThisBootIsAgedByTheBootClockNotTheWallClock() {
        var outbox = Outbox()
        _ = outbox.accept(slot: "s", at: epoch)
        let run = AgentRun(boot: nil, id: "run-1")
        outbox.markSending(slot: "s", at: epoch, run: run, uptime: 500)
        let entry = outbox.entry(for: "s")!
        #expect(Outbox.shownAge(entry, now: epoch + 3 * 86400, run: run, uptime: 501) == Double(1))
        var stepped = outbox
        #expect(stepped.parkStale(now: epoch + 3 * 86400, configuredSlots: ["s"], run: run, sinceBoot: 501).isEmpty)
        #expect(
            stepped.parkStale(now: epoch + 3 * 86400, configuredSlots: ["s"], run: run, sinceBoot: 500 + 86401)
                .map(\.reason) == [Outbox.sentOverADayAgoReason], "a day of this boot is a day")
        let other = AgentRun(boot: nil, id: "run-2")
        let age = Outbox.shownAge(entry, now: epoch + 3 * 86400, run: other, uptime: 10)
        #expect(age == Double(3 * 86400))
    }

    // MARK: - A board where nothing synchronises the clock (#29.2)

    /// `check-config` says which signal the agent waits for and whether anything here gives it.
    @Test func checkConfigSaysWhetherAnythingCreatesTheTimeSyncMarker() throws {
        let root = temporaryDirectory()
        func make(_ path: String) throws {
            try FileManager.default.createDirectory(
                atPath: POSIX.parentDirectory(of: root + path), withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: root + path, contents: Data())
        }
        let bare = TimeSyncSignal.inspect(root: root)
        #expect(!bare.isProvided && bare.otherClients.isEmpty && !bare.markerPresent)
        #expect(bare.description.contains("nothing here creates it (systemd-timesyncd is not installed)"))
        try make("/usr/sbin/chronyd")
        let chrony = TimeSyncSignal.inspect(root: root)
        #expect(chrony.otherClients == ["chronyd"] && chrony.description.contains("chronyd found"))
        try make("/usr/lib/systemd/systemd-timesyncd")
        // #40.10: installed, but systemd is not the init system (a container, another init): nothing runs it.
        let notInit = TimeSyncSignal.inspect(root: root)
        #expect(!notInit.isProvided)
        #expect(notInit.description.contains("systemd is not the init system here, so systemd-timesyncd never runs"))
        try FileManager.default.createDirectory(atPath: root + "/run/systemd/system", withIntermediateDirectories: true)
        #expect(TimeSyncSignal.inspect(root: root).description.contains("systemd-timesyncd creates it; now absent"))
        try FileManager.default.createDirectory(
            atPath: root + "/etc/systemd/system", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: root + "/etc/systemd/system/systemd-timesyncd.service", withDestinationPath: "/dev/null")
        let masked = TimeSyncSignal.inspect(root: root)
        #expect(masked.timesyncdMasked && !masked.isProvided)
        #expect(masked.description.contains("systemd-timesyncd is masked"))
        try make(WallClock.timesyncMarker)
        #expect(TimeSyncSignal.inspect(root: root).description.hasSuffix("now present"))
    }

    func tokenManager() throws -> TokenManager<ManualClock> {
        try TokenManager(
            store: MemoryTokenStore(
                TokenSet(
                    clientId: "client", refreshToken: Secret("Atzr|r"), accessToken: Secret("Atza|a"),
                    accessTokenExpiresAt: epoch + 86400 * 3, accessTokenLifetime: 3600)),
            lwa: LWAClient(
                http: ScriptedHTTPClient { _ in json(503, "") },
                tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil),
            clock: clock, wallTime: wallTime, random: .seeded(state: 5), logger: .init(label: "test"))
    }

    func orders(
        _ directory: String, drs: ScriptedHTTPClient, wallTime: (@Sendable () -> Double)? = nil,
        run: AgentRun = AgentRun(boot: "boot-now", id: "run-now"), sinceBoot: @escaping @Sendable () -> Double
    ) throws -> DeliveryLoop<ManualClock> {
        let tokens = try tokenManager()
        return DeliveryLoop(
            book: try OrderBook(
                stateDirectory: directory, run: run, wallTime: wallTime ?? self.wallTime, clockSynchronized: { false },
                sinceBoot: sinceBoot, logger: .init(label: "test")),
            slots: ["slot-1"],
            drs: DRSSession(
                client: DRSClient(http: drs, baseURL: try EndpointURL("http://127.0.0.1:1")), tokens: tokens),
            clock: clock, random: .seeded(state: 3), logger: .init(label: "test"))
    }

    /// An outbox whose slot-1 call was sent `age` seconds before the epoch, in an earlier boot.
    func earlierBootsCall(_ directory: String, age: Double) throws {
        var outbox = Outbox()
        _ = outbox.accept(slot: "slot-1", at: epoch - age - 1)
        outbox.markSending(slot: "slot-1", at: epoch - age, run: AgentRun(boot: "boot-before"))
        try DiskLane.saveNow(outbox, to: OrderBook.path(stateDirectory: directory))
    }

    func onDisk(_ directory: String) throws -> Outbox.Entry? {
        try StateFile.load(Outbox.self, from: OrderBook.path(stateDirectory: directory)) { _ in }?
            .entry(for: "slot-1")
    }

    @Test func anUnsynchronisedClockThatShowsMoreThanADayParksAtOnce() async throws {
        let directory = temporaryDirectory()
        try earlierBootsCall(directory, age: 86400 + 60)
        let drs = ScriptedHTTPClient { _ in json(200, #"{"detailCode":"TEST_ORDER_PLACED","eventInstanceId":"e-1"}"#) }
        let service = try orders(directory, drs: drs) { 30 }
        await StepDriver(clock: clock, service.step).pass(.seconds(1))
        #expect(try onDisk(directory)?.parkedReason == Outbox.sentOverADayAgoReason)
        #expect(drs.requests.isEmpty)
    }

    /// No NTP client at all and no clock kept over the power cut (it starts in 1970, so it shows no age): the
    /// call is at least as old as this boot, so after a day of it the wait ends, parked, without the clock ever
    /// being synchronised.
    @Test func theWaitForTheClockIsBoundedByTheTimeSinceBoot() async throws {
        let directory = temporaryDirectory()
        try earlierBootsCall(directory, age: 600)
        let drs = ScriptedHTTPClient { _ in json(200, #"{"detailCode":"TEST_ORDER_PLACED","eventInstanceId":"e-1"}"#) }
        let bootStart = clock.now
        let sinceBoot: @Sendable () -> Double = { [clock] in
            30 + Double(bootStart.duration(to: clock.now).components.seconds)
        }
        let service = try orders(directory, drs: drs, wallTime: { 1000 }, sinceBoot: sinceBoot)
        let driver = StepDriver(clock: clock, service.step)
        await driver.pass(.seconds(86400 - 60))
        #expect(try onDisk(directory)?.parkedReason == nil, "it waits while the boot is younger than a day")
        await driver.pass(.seconds(60))
        #expect(try onDisk(directory)?.parkedReason == Outbox.sentOverADayAgoReason)
        #expect(drs.requests.isEmpty, "never resent")
    }

    /// A press made in this boot is not merged into the entry that waits (and then parked with it): it gets an
    /// entry of its own, sent now, and acknowledged.
    @Test func aPressOfThisBootOrdersAtOnceWhileAnEarlierBootsCallWaits() async throws {
        let directory = temporaryDirectory()
        try earlierBootsCall(directory, age: 600)
        let drs = ScriptedHTTPClient { _ in json(200, #"{"detailCode":"TEST_ORDER_PLACED","eventInstanceId":"e-1"}"#) }
        let service = try orders(directory, drs: drs) { 30 }
        let driver = StepDriver(clock: clock, service.step)
        await driver.pass(.seconds(60))
        #expect(drs.requests.isEmpty, "the earlier boot's call waits")
        #expect(try await service.accept(slot: "slot-1").kind == .queued)
        let queued = try #require(try onDisk(directory))
        #expect(queued.pressedAt.count == 2, "a new entry, the times kept")
        // Its call leaves at once, so the press's write marks it, as this boot's: it does not wait for the clock.
        #expect(queued.unansweredBoot == "boot-now")
        #expect(!Outbox.waitsForClock(queued, run: AgentRun(boot: "boot-now"), clockSynchronized: false))
        await driver.pass(.seconds(1))
        #expect(drs.requests.map(\.url) == ["http://127.0.0.1:1/replenish/slot-1"])
        #expect(try onDisk(directory) == nil, "acknowledged")
        #expect(await service.book.snapshot.entries.isEmpty)
    }

    // MARK: - #40.1 and #40.2: this run's own calls

    /// A press of slot-1, then ten minutes: DRS heard two calls (`why`), and the outbox keeps nothing of the
    /// press (acknowledged, not parked).
    func expectAPressSentTwiceAndAcknowledged(
        _ service: DeliveryLoop<ManualClock>, drs: ScriptedHTTPClient, directory: String, _ why: Comment,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let driver = StepDriver(clock: clock, service.step)
        #expect(try await service.accept(slot: "slot-1").kind == .queued, sourceLocation: sourceLocation)
        await driver.pass(.seconds(600))
        #expect(drs.requests.count == 2, why, sourceLocation: sourceLocation)
        let left = try onDisk(directory)
        #expect(left == nil, "acknowledged, not parked: \(String(describing: left))", sourceLocation: sourceLocation)
    }

    /// DRS: the first call's answer is lost after it left (DRS may have it), every later one places the order.
    /// `whileOut` runs while the first call is out.
    func firstAnswerLost(whileOut: @escaping @Sendable () -> Void = {}) -> ScriptedHTTPClient {
        let calls = Mutex(0)
        return ScriptedHTTPClient { _ throws(AgentError) in
            let call = calls.withLock {
                $0 += 1
                return $0
            }
            if call == 1 {
                whileOut()
                throw AgentError(.network, "connection reset after the request was sent")
            }
            return json(200, #"{"detailCode":"TEST_ORDER_PLACED","eventInstanceId":"e-1"}"#)
        }
    }

    /// #40.1: the boot cannot be known (no usable runtime directory, the kernel's boot id hidden by the unit)
    /// on a board up two days whose clock nothing synchronises. A press still orders: the call is this run's,
    /// so its lost answer is resent at once, not held for the clock nor parked as "sent over a day ago".
    @Test func withTheBootUnknownAPressOrdersAndItsLostAnswerIsResent() async throws {
        let directory = temporaryDirectory()
        let drs = firstAnswerLost()
        let service = try orders(directory, drs: drs, run: AgentRun(boot: nil, id: "run-now")) { 2 * 86400 }
        try await expectAPressSentTwiceAndAcknowledged(
            service, drs: drs, directory: directory, "sent, its answer lost, sent again")
    }

    /// #40.2: the call leaves on a restored clock, its answer is lost before DRS has it, and timesyncd then
    /// steps the wall clock 3 days forward: the resend is a few seconds old by the boot's clock, so it leaves
    /// and orders, once.
    @Test func aClockStepAfterALostAnswerDoesNotParkTheResend() async throws {
        let directory = temporaryDirectory()
        let shift = Mutex(0.0)
        let drs = firstAnswerLost { shift.withLock { $0 = 3 * 86400 } }
        let base = clock.wallTime(from: epoch)
        let bootStart = clock.now
        let sinceBoot: @Sendable () -> Double = { [clock] in
            300 + Double(bootStart.duration(to: clock.now).components.seconds)
        }
        let service = try orders(
            directory, drs: drs, wallTime: { base() + shift.withLock { $0 } }, sinceBoot: sinceBoot)
        try await expectAPressSentTwiceAndAcknowledged(service, drs: drs, directory: directory, "resent after the step")
    }
}
