import NIOCore
import NIOHTTP1

/// Closes a connection whose request does not arrive whole within the deadline: from the connection's
/// start, then again from each answer's end. A request being answered is not timed. The rule is
/// `RequestDeadlineMachine`'s; this handler feeds it what passes through the pipeline, with the event loop's
/// instant, and carries out its actions (the timer, the close). It also keeps the connection's tracker up to
/// date for `ConnectionAdmission`.
final class RequestDeadline: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let tracker: LocalHTTPServer.ConnectionTracker
    // Touched only on the channel's event loop.
    private var machine: RequestDeadlineMachine
    private var timer: Scheduled<Void>?

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
        }
        context.write(data, promise: promise)
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
