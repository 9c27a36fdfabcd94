import NIOCore
import NIOHTTP1

/// Closes a connection whose request does not arrive whole within the deadline: from the connection's
/// start, then again from each answer's end. A request being answered is not timed.
final class RequestDeadline: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let deadline: TimeAmount
    private let tracker: LocalHTTPServer.ConnectionTracker
    // Touched only on the channel's event loop.
    private var timer: Scheduled<Void>?

    init(deadline: TimeAmount, tracker: LocalHTTPServer.ConnectionTracker) {
        self.deadline = deadline
        self.tracker = tracker
    }

    func handlerAdded(context: ChannelHandlerContext) { arm(context: context) }

    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) {
            timer?.cancel()
            timer = nil
            tracker.answering.store(true, ordering: .relaxed)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            tracker.waitingSince.store(NIODeadline.now().uptimeNanoseconds, ordering: .relaxed)
            tracker.answering.store(false, ordering: .relaxed)
            arm(context: context)
        }
        context.write(data, promise: promise)
    }

    private func arm(context: ChannelHandlerContext) {
        timer?.cancel()
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: deadline) {
            loopBound.value.triggerUserOutboundEvent(LingeringClose.CloseNow(), promise: nil)
        }
    }
}
