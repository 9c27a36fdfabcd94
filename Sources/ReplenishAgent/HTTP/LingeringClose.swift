import NIOCore

/// The "lingering close" of nginx and Apache, nearest the socket. Once armed (an answer that ends the
/// connection early, such as a 413 while the peer is still uploading), input is discarded instead of
/// parsed, and a close becomes: flush the answer, shut down the sending side, keep reading and discarding
/// until the peer closes, `time` has passed or `bytes` were discarded, then close. Closing at once would make
/// the kernel answer the unread upload with a reset, which can destroy the answer before the peer reads it.
/// `CloseNow` closes at once (deadline, eviction). A peer that half-closed has nothing left to send: then
/// a close (armed or not) flushes the answer and closes, and a lingering close ends. The rules are
/// `LingeringCloseMachine`'s; this handler feeds it what passes through, with the event loop's instant, and
/// carries out its actions (discarding, reading, the timer, the flush, the closes).
final class LingeringClose: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Arm: Sendable {}
    struct CloseNow: Sendable {}

    private let tracker: LocalHTTPServer.ConnectionTracker
    // Touched only on the channel's event loop.
    private var machine: LingeringCloseMachine
    private var timer: Scheduled<Void>?
    /// The promise of the close that lingers, completed when the connection is closed.
    private var closePromise: EventLoopPromise<Void>?

    init(time: TimeAmount, idle: TimeAmount, bytes: Int, tracker: LocalHTTPServer.ConnectionTracker) {
        self.machine = LingeringCloseMachine(time: time, idle: idle, bytes: bytes)
        self.tracker = tracker
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let count = unwrapInboundIn(data).readableBytes
        if handle(.read(count: count, at: context.eventLoop.now), context: context) == .forward {
            context.fireChannelRead(data)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if handle(.readComplete, context: context) == .forward { context.fireChannelReadComplete() }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case ChannelEvent.inputClosed = event else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        if handle(.inputClosed, context: context) == .forward { context.fireUserInboundEventTriggered(event) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        closePromise?.succeed()
        closePromise = nil
        context.fireChannelInactive()
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        switch event {
        case is Arm:
            handle(.armed, context: context)
            tracker.lingering.store(machine.armed, ordering: .relaxed)
            promise?.succeed()
        case is CloseNow:
            promise?.succeed()
            handle(.closeNow, context: context)
        default:
            context.triggerUserOutboundEvent(event, promise: promise)
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        let action = machine.handle(.closeRequested(mode, at: context.eventLoop.now))
        guard action != .forward else {
            context.close(mode: mode, promise: promise)
            return
        }
        // The close is taken over: its promise completes when the connection is closed.
        if let closePromise, let promise {
            closePromise.futureResult.cascade(to: promise)
        } else if let promise {
            closePromise = promise
        }
        perform(action, context: context)
    }

    /// Feeds `event` to the machine and carries out what it says; `.forward` is the caller's to carry out.
    @discardableResult
    private func handle(_ event: LingeringCloseMachine.Event, context: ChannelHandlerContext)
        -> LingeringCloseMachine.Action
    {
        let action = machine.handle(event)
        perform(action, context: context)
        return action
    }

    private func perform(_ action: LingeringCloseMachine.Action, context: ChannelHandlerContext) {
        switch action {
        case .forward, .none:
            break
        case .read:
            context.read()
        case .linger(let until, let read):
            schedule(at: until, context: context)
            // An empty write completes after everything written before it: then the answer is out.
            let flushed = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(ByteBuffer()), promise: flushed)
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            flushed.futureResult.whenComplete { _ in
                let (handler, context) = loopBound.value
                handler.handle(.answerFlushed, context: context)
            }
            if read { context.read() }
        case .arm(let until):
            schedule(at: until, context: context)
        case .shutdownOutput:
            context.close(mode: .output, promise: nil)
        case .close:
            timer?.cancel()
            timer = nil
            let promise = closePromise
            closePromise = nil
            context.close(mode: .all, promise: promise)
        }
    }

    private func schedule(at deadline: NIODeadline, context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = loopBound.value
            handler.handle(.timerFired(at: context.eventLoop.now), context: context)
        }
    }
}
