import NIOCore

/// The "lingering close" of nginx and Apache, nearest the socket. Once armed (an answer that ends the
/// connection early, such as a 413 while the peer is still uploading), input is discarded instead of
/// parsed, and a close becomes: flush the answer, shut down the sending side, keep reading and discarding
/// until the peer closes, `time` has passed or `bytes` were discarded, then close. Closing at once would make
/// the kernel answer the unread upload with a reset, which can destroy the answer before the peer reads it.
/// `CloseNow` closes at once (deadline, eviction). A peer that half-closed has nothing left to send: then
/// a close (armed or not) flushes the answer and closes, and a lingering close ends.
final class LingeringClose: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Arm: Sendable {}
    struct CloseNow: Sendable {}

    private let time: TimeAmount
    private let idle: TimeAmount
    private let bytes: Int
    private let tracker: LocalHTTPServer.ConnectionTracker
    // Touched only on the channel's event loop.
    private var armed = false
    private var lingering = false
    /// The peer half-closed (`ChannelEvent.inputClosed`): no more input will come.
    private var inputClosed = false
    /// The lingering close flushed the answer.
    private var answerOut = false
    private var discarded = 0
    private var lingerStarted = NIODeadline.now()
    private var lastRead = NIODeadline.now()
    private var timer: Scheduled<Void>?
    private var closePromise: EventLoopPromise<Void>?

    init(time: TimeAmount, idle: TimeAmount, bytes: Int, tracker: LocalHTTPServer.ConnectionTracker) {
        self.time = time
        self.idle = idle
        self.bytes = bytes
        self.tracker = tracker
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard armed else {
            context.fireChannelRead(data)
            return
        }
        discarded += unwrapInboundIn(data).readableBytes
        lastRead = .now()
        if discarded > bytes { finish(context: context) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if armed {
            // Keep reading: nothing above asks for more once the request is answered.
            if lingering { context.read() }
            return
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case ChannelEvent.inputClosed = event else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        inputClosed = true
        if lingering {
            // What the lingering close waited for: the peer is done sending (once the answer is out; if it
            // is not yet, the flush's completion closes).
            if answerOut { finish(context: context) }
        } else if !armed {
            // Once armed, the answer that ends the connection is out or going: the parser above must not
            // see the end of an unfinished request and answer it a second time.
            context.fireUserInboundEventTriggered(event)
        }
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
            armed = true
            tracker.lingering.store(true, ordering: .relaxed)
            promise?.succeed()
        case is CloseNow:
            promise?.succeed()
            finish(context: context)
        default:
            context.triggerUserOutboundEvent(event, promise: promise)
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard armed || inputClosed, mode == .all else {
            context.close(mode: mode, promise: promise)
            return
        }
        if let closePromise, let promise {
            closePromise.futureResult.cascade(to: promise)
        } else if let promise {
            closePromise = promise
        }
        guard !lingering else { return }
        lingering = true
        lingerStarted = .now()
        lastRead = lingerStarted
        schedule(context: context)
        // An empty write completes after everything written before it: then the answer is out.
        let flushed = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(ByteBuffer()), promise: flushed)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        flushed.futureResult.whenComplete { _ in
            let (handler, context) = loopBound.value
            handler.answerOut = true
            // A peer that half-closed sends nothing more: nothing to read and discard.
            if handler.inputClosed {
                handler.finish(context: context)
            } else {
                context.close(mode: .output, promise: nil)
            }
        }
        if !inputClosed { context.read() }
    }

    /// Wakes at the end of the lingering time or of the idle time, whichever comes first.
    private func schedule(context: ChannelHandlerContext) {
        let end = min(lingerStarted + time, lastRead + idle)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: end) {
            let (handler, context) = loopBound.value
            if NIODeadline.now() >= min(handler.lingerStarted + handler.time, handler.lastRead + handler.idle) {
                handler.finish(context: context)
            } else {
                handler.schedule(context: context)
            }
        }
    }

    private func finish(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        let promise = closePromise
        closePromise = nil
        context.close(mode: .all, promise: promise)
    }
}
