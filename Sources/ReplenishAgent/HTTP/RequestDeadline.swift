import NIOCore
import NIOHTTP1

/// Closes a connection whose request does not arrive whole within the deadline: from the connection's
/// start, then again from each answer's end. A request being answered is not timed. The rule is
/// `RequestDeadlineMachine`'s; this handler feeds it what passes through the pipeline, with the event loop's
/// instant, and carries out its actions (the timer, the close). It also keeps the connection's tracker up to
/// date for `ConnectionAdmission`. When the server stops (`Drain`) it closes the connection as soon as it owes no
/// answer: at once when idle, else after the answer to the last request it received, pipelined ones included.
final class RequestDeadline: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let tracker: LocalHTTPServer.ConnectionTracker
    // Touched only on the channel's event loop.
    private var machine: RequestDeadlineMachine
    private var timer: Scheduled<Void>?
    /// The server stops: close once no request is being answered.
    private var draining = false

    /// The server stops: answer what was received, then close (`LocalHTTPServer` closes the connection at once
    /// when that takes longer than `Limits.drainTime`).
    struct Drain: Sendable {}

    init(deadline: TimeAmount, tracker: LocalHTTPServer.ConnectionTracker) {
        self.machine = RequestDeadlineMachine(limit: deadline)
        self.tracker = tracker
    }

    func handlerAdded(context: ChannelHandlerContext) { handle(.started(at: context.eventLoop.now), context: context) }

    func handlerRemoved(context: ChannelHandlerContext) { handle(.ended, context: context) }

    func channelInactive(context: ChannelHandlerContext) {
        handle(.ended, context: context)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) {
            handle(.requestComplete, context: context)
            tracker.answering.store(machine.isAnswering, ordering: .relaxed)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            let now = context.eventLoop.now
            tracker.waitingSince.store(now.uptimeNanoseconds, ordering: .relaxed)
            tracker.answering.store(false, ordering: .relaxed)
            handle(.answerSent(at: now), context: context)
            // A request pipelined behind this one is delivered by the write (SwiftNIO's pipeline handler lets it
            // through once the answer's end passes), so whether the connection still owes an answer is known after.
            context.write(data, promise: promise)
            closeIfDrained(context: context)
            return
        }
        context.write(data, promise: promise)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is Drain else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        promise?.succeed()
        draining = true
        closeIfDrained(context: context)
    }

    /// Closes a draining connection that owes no answer, as a lingering close: the last answer is flushed before
    /// the sending side shuts down, so a reset cannot destroy it.
    private func closeIfDrained(context: ChannelHandlerContext) {
        guard draining, !machine.isAnswering else { return }
        draining = false
        context.triggerUserOutboundEvent(LingeringClose.Arm(), promise: nil)
        context.close(promise: nil)
    }

    private func handle(_ event: RequestDeadlineMachine.Event, context: ChannelHandlerContext) {
        switch machine.handle(event) {
        case .none:
            break
        case .arm(let deadline):
            timer?.cancel()
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(deadline: deadline) {
                let (handler, context) = loopBound.value
                handler.handle(.timerFired(at: context.eventLoop.now), context: context)
            }
        case .cancelTimer:
            timer?.cancel()
            timer = nil
        case .close:
            context.triggerUserOutboundEvent(LingeringClose.CloseNow(), promise: nil)
        }
    }
}
