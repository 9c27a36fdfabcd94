import Foundation
import NIOHTTP1
import Synchronization
import Testing

@testable import ReplenishAgent

/// The pairing window and the port's timing: pure decisions on a manual clock. The requests on the port are
/// `PairingRequestTests`.
@Suite(.tags(.unit)) struct PairingWindowTests {
    typealias Window = PairingWindow<ManualClock.Instant>
    let clock = ManualClock()

    func at(_ seconds: Int) -> ManualClock.Instant { ManualClock.Instant(offset: .seconds(seconds)) }
    func apply(_ window: inout Window, _ event: Window.Event, _ now: ManualClock.Instant) -> Bool {
        window.handle(event, at: now)
    }
    func expire(_ window: inout Window, _ now: ManualClock.Instant) -> Bool { window.expire(at: now) }

    @Test func opensAtAnUnpairedStartForItsLengthAndClosesWhenPaired() {
        var window = Window(length: .seconds(600))
        #expect(apply(&window, .started(paired: false), at(0)))
        #expect(window.isOpen(at: at(599)))
        #expect(!window.isOpen(at: at(600)))
        #expect(!expire(&window, at(600)) && window.closesAt == nil)
        // A long press on the unpaired device opens it again, for the whole length from the press.
        #expect(apply(&window, .longPress, at(1000)))
        #expect(window.closesAt == at(1600))
        #expect(apply(&window, .longPress, at(1300)) && window.closesAt == at(1900))
        // Paired: closed at once.
        #expect(!apply(&window, .paired, at(1301)))
        #expect(!window.isOpen(at: at(1302)))
    }

    @Test func aPairedDeviceNeverOpensItExceptWhenThePairingIsLost() {
        var window = Window(length: .seconds(600))
        #expect(!apply(&window, .started(paired: true), at(0)))
        // The long press of a paired device is the re-pairing confirmation, not this.
        #expect(!apply(&window, .longPress, at(10)))
        // invalid_grant, or re-pairing confirmed: open.
        #expect(apply(&window, .pairingLost, at(20)))
        #expect(window.closesAt == at(620))
        #expect(!expire(&window, at(620)))
        // Unpaired now: a long press opens it again.
        #expect(apply(&window, .longPress, at(700)))
    }

    @Test func theServiceServesOnlyWhileOpenAndPublishesItsState() async throws {
        let service = PairingWindowKeeper(
            length: .seconds(600), clock: clock, wallTime: clock.wallTime(from: 1_800_000_000),
            logger: .init(label: "test"))
        // Subscribed first, as the LED and the status file are; read at the end.
        let changes = service.changes.subscribe()
        let serving = Mutex(0)
        let starts = Mutex(0)
        let answered = Mutex<PairingAnswered?>(nil)
        let (started, start) = AsyncStream.makeStream(of: Void.self)
        let serve: PairingWindowKeeper<ManualClock>.Serve = { answer in
            answered.withLock { $0 = answer }
            starts.withLock { $0 += 1 }
            serving.withLock { $0 += 1 }
            defer { serving.withLock { $0 -= 1 } }
            start.yield()
            // Serves until cancelled (an AsyncStream's iteration ends with its task's cancellation).
            let (forever, open) = AsyncStream.makeStream(of: Void.self)
            for await _ in forever {}
            open.finish()
        }
        var startedServers = started.makeAsyncIterator()
        let driver = StepDriver(clock: clock) { await service.step(serve: serve) }
        // Closed (never started): nothing served.
        await driver.pass(.seconds(60))
        #expect(starts.withLock { $0 } == 0)
        await service.handle(.started(paired: false))
        await driver.drain()
        _ = await startedServers.next()
        #expect(serving.withLock { $0 } == 1)
        #expect(await service.state == .init(open: true, closesAt: 1_800_000_660))
        await driver.pass(.seconds(599))
        #expect(serving.withLock { $0 } == 1)
        await driver.pass(.seconds(1))
        // The step that closed the window waited for the server to end.
        #expect(serving.withLock { $0 } == 0)
        #expect(await service.state == .init(open: false, closesAt: nil))
        // A long press opens it again; pairing closes it once the 204 is out.
        await service.handle(.longPress)
        await driver.drain()
        _ = await startedServers.next()
        #expect(serving.withLock { $0 } == 1 && starts.withLock { $0 } == 2)
        await service.handle(.paired)
        await driver.pass(PairingPortTiming<ManualClock.Instant>.answerGrace - .milliseconds(1))
        #expect(serving.withLock { $0 } == 1, "the port stays open until the app has its answer")
        answered.withLock { $0 }?.ring()
        await driver.drain()
        #expect(serving.withLock { $0 } == 0)
        #expect(await !service.isOpen)
        // Paired again without the app taking its answer: the port closes after the grace all the same.
        await service.handle(.pairingLost)
        await driver.drain()
        _ = await startedServers.next()
        await service.handle(.paired)
        await driver.pass(PairingPortTiming<ManualClock.Instant>.answerGrace)
        #expect(serving.withLock { $0 } == 0 && starts.withLock { $0 } == 3)
        // What the LED and the status file were told: closed (the first look, before the start), then open
        // (closing 600 s after the start) and closed, three times.
        service.changes.finish()
        var seen: [PairingWindowKeeper<ManualClock>.State] = []
        for await state in changes { seen.append(state) }
        #expect(seen.prefix(2) == [.init(open: false, closesAt: nil), .init(open: true, closesAt: 1_800_000_660)])
        #expect(seen.map(\.open) == [false, true, false, true, false, true, false], "\(seen)")
    }

    /// A reset loses the pairing (the window opens, and the status recorder may write that at once) and then
    /// wipes `status.json` (a factory reset) or forgets the account in it (`deregister`): the window's state
    /// goes back into the file, so `status` does not say "closed" while the pairing port is open.
    @Test(arguments: [FactoryReset<ManualClock>.Scope.everything, .pairing])
    func aResetsWipeOfTheStatusFileKeepsTheOpenWindowInIt(scope: FactoryReset<ManualClock>.Scope) async throws {
        let service = PairingWindowKeeper(
            length: .seconds(600), clock: clock, wallTime: clock.wallTime(from: 1_800_000_000),
            logger: .init(label: "test"))
        let directory = temporaryDirectory()
        let status = try SubscriptionBook(stateDirectory: directory) { _ in }
        let runtime = temporaryDirectory()
        let shown = ShownStatusBook(runtimeDirectory: runtime, logger: .init(label: "test"))
        await service.handle(.pairingLost)
        let open = await service.state
        #expect(open == .init(open: true, closesAt: 1_800_000_600))
        // The recorder's write landed before the reset's wipe.
        await shown.recordPairingWindow(closesAt: open.closesAt)
        let changes = service.changes.subscribe()
        switch scope {
        case .everything: try await status.wipe()
        case .pairing: try await status.forgetAccount()
        }
        await PairingByMode.window(service, minutes: 10).afterWipe()
        service.changes.finish()
        let (tokens, noTokens) = AsyncStream.makeStream(of: TokenEvent.self)
        let (linking, noLinking) = AsyncStream.makeStream(of: LinkingCode?.self)
        noTokens.finish()
        noLinking.finish()
        // The recorder, as the daemon runs it, over what was published after the wipe (it ends with the streams).
        await ShownStatusRecorder.follow(status: shown, tokens: tokens, window: changes, linking: linking)
        #expect(await shown.shown.pairingWindowClosesAt == 1_800_000_600)
        // In the runtime directory's file too, which `status` reads.
        guard
            case .read(let file) = try StateFile.read(
                ShownStatus.self, from: ShownStatus.path(runtimeDirectory: runtime))
        else {
            Issue.record("no shown status file")
            return
        }
        #expect(file.pairingWindowClosesAt == 1_800_000_600)
    }

    // MARK: the port's timing (PairingPortTiming, on instants)

    typealias Port = PairingPortTiming<ManualClock.Instant>

    @Test func thePortIsServedWhileTheWindowIsOpenAndStoppedWhenItClosesOnItsTime() {
        var port = Port()
        #expect(
            port.next(.init(closesAt: nil, paired: false, serving: false, answered: false), at: at(0))
                == .wait(until: nil))
        #expect(
            port.next(.init(closesAt: at(600), paired: false, serving: false, answered: false), at: at(0))
                == .startServer)
        #expect(
            port.next(.init(closesAt: at(600), paired: false, serving: true, answered: false), at: at(1))
                == .wait(until: at(600)))
        #expect(
            port.next(.init(closesAt: nil, paired: false, serving: true, answered: false), at: at(600)) == .stopServer)
    }

    @Test func closedByAPairingThePortWaitsForTheAppsAnswerTheGraceAtMost() {
        var port = Port()
        let waiting = Port.Facts(closesAt: nil, paired: true, serving: true, answered: false)
        #expect(port.next(waiting, at: at(10)) == .wait(until: at(15)))
        // Looked at again within the grace: the same deadline, not a new one.
        #expect(port.next(waiting, at: at(12)) == .wait(until: at(15)))
        #expect(port.next(waiting, at: at(15)) == .stopServer)
        port.stopped(failed: false, at: at(15))
        // Answered: stopped at once.
        #expect(port.next(.init(closesAt: nil, paired: true, serving: true, answered: true), at: at(20)) == .stopServer)
    }

    @Test func aWindowThatOpensAgainDuringTheGraceGetsANewServerAndANewAnswer() {
        var port = Port()
        // Paired at 10 s: the grace for the app's answer runs to 15 s.
        #expect(
            port.next(.init(closesAt: nil, paired: true, serving: true, answered: false), at: at(10))
                == .wait(until: at(15)))
        // The pairing is lost at 12 s: the window opens again, and the old server (with its answer) is stopped.
        #expect(
            port.next(.init(closesAt: at(612), paired: false, serving: true, answered: false), at: at(12))
                == .stopServer)
        port.stopped(failed: false, at: at(12))
        #expect(
            port.next(.init(closesAt: at(612), paired: false, serving: false, answered: false), at: at(12))
                == .startServer)
        // The new server's window closes by a pairing: a full grace again.
        #expect(
            port.next(.init(closesAt: nil, paired: true, serving: true, answered: false), at: at(100))
                == .wait(until: at(105)))
    }

    @Test func aFailedServerIsStartedAgainOnlyAfterTheRestartDelay() {
        var port = Port()
        port.stopped(failed: true, at: at(100))
        let open = Port.Facts(closesAt: at(600), paired: false, serving: false, answered: false)
        #expect(port.next(open, at: at(101)) == .wait(until: at(105)))
        #expect(port.next(open, at: at(105)) == .startServer)
    }
}
