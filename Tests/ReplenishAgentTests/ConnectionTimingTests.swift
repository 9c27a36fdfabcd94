import NIOCore
import Testing

@testable import ReplenishAgent

/// The local server's request deadline and lingering close on instants alone (`RequestDeadlineMachine`,
/// `LingeringCloseMachine`): no channel, no clock, no waiting.
@Suite(.tags(.unit)) struct ConnectionTimingTests {
    func at(_ seconds: Double) -> NIODeadline { .uptimeNanoseconds(UInt64(seconds * 1_000_000_000)) }

    // MARK: The request deadline

    @Test func aRequestIsOwedWithinTheLimitOfTheStartThenOfEachAnswer() {
        var machine = RequestDeadlineMachine(limit: .seconds(10))
        #expect(machine.handle(.started(at: at(1))) == .arm(deadline: at(11)))
        // A timer that went off early is set again, not obeyed.
        #expect(machine.handle(.timerFired(at: at(10.999))) == .arm(deadline: at(11)))
        #expect(machine.handle(.timerFired(at: at(11))) == .close)

        var answered = RequestDeadlineMachine(limit: .seconds(10))
        _ = answered.handle(.started(at: at(0)))
        _ = answered.handle(.requestComplete)
        #expect(answered.handle(.answerSent(at: at(4))) == .arm(deadline: at(14)))
        #expect(answered.handle(.timerFired(at: at(14))) == .close)
    }

    @Test func nothingIsTimedWhileARequestIsAnswered() {
        var machine = RequestDeadlineMachine(limit: .seconds(10))
        _ = machine.handle(.started(at: at(0)))
        #expect(!machine.isAnswering)
        #expect(machine.handle(.requestComplete) == .cancelTimer)
        #expect(machine.isAnswering)
        // Even a timer that slipped through closes nothing while the answer is being made.
        #expect(machine.handle(.timerFired(at: at(100))) == .none)
        #expect(machine.handle(.answerSent(at: at(100))) == .arm(deadline: at(110)))
        #expect(!machine.isAnswering)
    }

    @Test func anEndedConnectionIsNotTimedAgain() {
        var machine = RequestDeadlineMachine(limit: .seconds(10))
        _ = machine.handle(.started(at: at(0)))
        #expect(machine.handle(.ended) == .cancelTimer)
        #expect(machine.handle(.answerSent(at: at(1))) == .none)
        #expect(machine.handle(.timerFired(at: at(20))) == .none)
    }

    // MARK: The lingering close

    func lingering() -> LingeringCloseMachine {
        LingeringCloseMachine(time: .seconds(30), idle: .seconds(5), bytes: 100)
    }

    @Test func unarmedItStaysOutOfTheWay() {
        var machine = lingering()
        #expect(machine.handle(.read(count: 10, at: at(0))) == .forward)
        #expect(machine.handle(.readComplete) == .forward)
        #expect(machine.handle(.closeRequested(.all, at: at(1))) == .forward)
        #expect(machine.handle(.closeRequested(.output, at: at(1))) == .forward)
        #expect(machine.handle(.timerFired(at: at(60))) == .none)
        #expect(machine.handle(.closeNow) == .close)
    }

    @Test func armedInputIsDiscardedAndTheCloseLingersUntilThePeerIsIdle() {
        var machine = lingering()
        #expect(machine.handle(.armed) == .none)
        #expect(machine.armed)
        // The rest of an upload the answer refused: discarded, not parsed.
        #expect(machine.handle(.read(count: 10, at: at(0))) == .none)
        #expect(machine.handle(.readComplete) == .none)
        #expect(machine.handle(.closeRequested(.all, at: at(1))) == .linger(until: at(6), read: true))
        #expect(machine.handle(.answerFlushed) == .shutdownOutput)
        #expect(machine.handle(.readComplete) == .read)
        #expect(machine.handle(.read(count: 10, at: at(4))) == .none)
        // The byte at 4 s moved the idle end to 9 s.
        #expect(machine.handle(.timerFired(at: at(6))) == .arm(until: at(9)))
        #expect(machine.handle(.timerFired(at: at(9))) == .close)
    }

    @Test func aPeerThatKeepsSendingIsClosedAtTheLingeringTime() {
        var machine = lingering()
        _ = machine.handle(.armed)
        _ = machine.handle(.closeRequested(.all, at: at(0)))
        _ = machine.handle(.answerFlushed)
        for second in stride(from: 4.0, through: 28, by: 4) {
            _ = machine.handle(.read(count: 1, at: at(second)))
            #expect(machine.handle(.timerFired(at: at(second))) == .arm(until: at(min(second + 5, 30))))
        }
        _ = machine.handle(.read(count: 1, at: at(29)))
        #expect(machine.handle(.timerFired(at: at(30))) == .close)
    }

    @Test func moreThanTheByteBudgetClosesAtOnce() {
        var machine = lingering()
        _ = machine.handle(.armed)
        #expect(machine.handle(.read(count: 100, at: at(0))) == .none)
        #expect(machine.handle(.read(count: 1, at: at(0))) == .close)
    }

    @Test func thePeersHalfCloseEndsTheLingeringCloseOnceTheAnswerIsOut() {
        var early = lingering()
        _ = early.handle(.armed)
        _ = early.handle(.closeRequested(.all, at: at(0)))
        #expect(early.handle(.inputClosed) == .none)
        #expect(early.handle(.answerFlushed) == .close)

        var late = lingering()
        _ = late.handle(.armed)
        _ = late.handle(.closeRequested(.all, at: at(0)))
        #expect(late.handle(.answerFlushed) == .shutdownOutput)
        #expect(late.handle(.inputClosed) == .close)
    }

    @Test func aHalfClosedPeerGetsItsAnswerThenTheCloseWithoutReading() {
        var machine = lingering()
        // Unarmed, the parser above sees the half-close (and answers what came before it).
        #expect(machine.handle(.inputClosed) == .forward)
        #expect(machine.handle(.closeRequested(.all, at: at(0))) == .linger(until: at(5), read: false))
        #expect(machine.handle(.answerFlushed) == .close)

        var armed = lingering()
        _ = armed.handle(.armed)
        // Armed, the answer that ends the connection is out or going: the parser must not answer again.
        #expect(armed.handle(.inputClosed) == .none)
    }

    @Test func aSecondCloseJoinsTheLingeringOne() {
        var machine = lingering()
        _ = machine.handle(.armed)
        #expect(machine.handle(.closeRequested(.all, at: at(0))) == .linger(until: at(5), read: true))
        #expect(machine.handle(.closeRequested(.all, at: at(2))) == .none)
        #expect(machine.handle(.timerFired(at: at(5))) == .close)
    }
}
