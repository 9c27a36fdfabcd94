import NIOCore
import NIOHTTP1

/// One connection's HTTP/1.1 handler: collects a request's head and body, asks the `EmulatorService`, and
/// writes the answer; keeps the connection open when the client asked for keep-alive.
final class EmulatorHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Bodies above this are answered `413` (after being read and discarded, so the connection stays usable).
    static let maximumBodySize = 1 << 20

    private let service: EmulatorService
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var bodyTooLarge = false

    init(service: EmulatorService) {
        self.service = service
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            head = requestHead
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
                headers: requestHead.headers.map { (name: $0.name, value: $0.value) }, body: body)
            let response = bodyTooLarge ? service.refuseTooLarge(request) : service.answer(request)
            body = []
            write(response, for: requestHead, context: context)
        }
    }

    private func write(_ response: EmulatorResponse, for request: HTTPRequestHead, context: ChannelHandlerContext) {
        let keepAlive = request.isKeepAlive
        var headers = HTTPHeaders(response.headers.map { ($0.name, $0.value) })
        headers.replaceOrAdd(name: "Content-Length", value: String(response.body.count))
        if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        let head = HTTPResponseHead(
            version: request.version, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if !response.body.isEmpty {
            var buffer = context.channel.allocator.buffer(capacity: response.body.count)
            buffer.writeBytes(response.body)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        let done = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
        if !keepAlive {
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.futureResult.whenComplete { _ in bound.value.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
