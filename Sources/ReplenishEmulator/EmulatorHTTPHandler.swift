import NIOCore
import NIOHTTP1

/// One connection's HTTP/1.1 handler: collects a request's head and body, asks the `EmulatorService` what to
/// do, and does it: writes the answer (keeping the connection open when the client asked for keep-alive),
/// closes the connection without answering, or waits on a timer first (injected faults).
final class EmulatorHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Bodies above this are answered `413` (after being read and discarded, so the connection stays usable).
    static let maximumBodySize = 1 << 20

    /// The filler of a `huge` fault's body, shared by every answer (written `hugeChunkCount` times).
    private static let hugeChunk: ByteBuffer = {
        var buffer = ByteBufferAllocator().buffer(capacity: 1 << 16)
        buffer.writeRepeatingByte(UInt8(ascii: "x"), count: 1 << 16)
        return buffer
    }()
    private static let hugeChunkCount = EmulatorState.hugeBodySize / (1 << 16)

    private let service: EmulatorService
    /// This connection's number (`EmulatorService.connectionAccepted`).
    private let connection: Int
    /// Close after every answer, keep-alive or not (`serve --close-after-answer`).
    private let closeAfterAnswer: Bool
    /// Requests begun on this connection so far.
    private var requestsOnConnection = 0
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var bodyTooLarge = false
    /// Set once the handler has left the pipeline: a delayed answer then has nowhere to go.
    private var removed = false

    init(service: EmulatorService, connection: Int) {
        self.service = service
        self.connection = connection
        self.closeAfterAnswer = service.closeAfterAnswer
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            head = requestHead
            requestsOnConnection += 1
            body = []
            bodyTooLarge = false
            if requestHead.headers["expect"].contains(where: { $0.lowercased() == "100-continue" }) {
                let interim = HTTPResponseHead(version: requestHead.version, status: .continue)
                context.writeAndFlush(wrapOutboundOut(.head(interim)), promise: nil)
            }
        case .body(var buffer):
            if bodyTooLarge || body.count + buffer.readableBytes > Self.maximumBodySize {
                bodyTooLarge = true
                body = []
            } else if let bytes = buffer.readBytes(length: buffer.readableBytes) {
                body += bytes
            }
        case .end:
            guard let requestHead = head else { return }
            head = nil
            let request = EmulatorRequest(
                method: requestHead.method.rawValue, target: requestHead.uri,
                headers: requestHead.headers.map { (name: $0.name, value: $0.value) }, body: body,
                connection: connection, requestOnConnection: requestsOnConnection)
            body = []
            if bodyTooLarge {
                write(service.refuseTooLarge(request), hugeBody: false, for: requestHead, context: context)
            } else {
                carryOut(service.dispatch(request), request: request, head: requestHead, context: context)
            }
        }
    }

    private func carryOut(
        _ disposition: EmulatorDisposition, request: EmulatorRequest, head: HTTPRequestHead,
        context: ChannelHandlerContext
    ) {
        switch disposition {
        case .answer(let response):
            write(response, hugeBody: false, for: head, context: context)
        case .answerHuge(let response):
            write(response, hugeBody: true, for: head, context: context)
        case .drop:
            context.close(promise: nil)
        case .delay(let seconds):
            // The HTTP pipeline handler holds back any pipelined request on this connection until this answer
            // ends; other connections go on. The work is done when the timer fires even if the client is gone.
            let service = self.service
            context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(Int64(seconds * 1e9))) {
                let disposition = service.resumeDelayed(request)
                guard !self.removed, context.channel.isActive else { return }
                self.carryOut(disposition, request: request, head: head, context: context)
            }
        }
    }

    private func write(
        _ response: EmulatorResponse, hugeBody: Bool, for request: HTTPRequestHead, context: ChannelHandlerContext
    ) {
        let keepAlive = request.isKeepAlive
        var headers = HTTPHeaders(response.headers.map { ($0.name, $0.value) })
        let length = hugeBody ? Self.hugeChunkCount * Self.hugeChunk.readableBytes : response.body.count
        headers.replaceOrAdd(name: "Content-Length", value: String(length))
        if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        let head = HTTPResponseHead(
            version: request.version, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if hugeBody {
            for _ in 0..<Self.hugeChunkCount {
                context.write(wrapOutboundOut(.body(.byteBuffer(Self.hugeChunk))), promise: nil)
            }
        } else if !response.body.isEmpty {
            var buffer = context.channel.allocator.buffer(capacity: response.body.count)
            buffer.writeBytes(response.body)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        let done = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
        if !keepAlive || closeAfterAnswer {
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.futureResult.whenComplete { _ in bound.value.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
