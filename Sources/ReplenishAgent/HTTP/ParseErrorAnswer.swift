import NIOCore
import NIOHTTP1

/// Answers what SwiftNIO's parser refused: a head over the size or field-count limits gets 431, anything
/// else unparsable 400; then the connection closes (lingering). Like `HTTPServerProtocolErrorHandler`,
/// with the endpoints' JSON error shape and the 431.
final class ParseErrorAnswer: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private var responseStarted = false
    /// An error answer went out: the connection says nothing more (a late answer of the request handler
    /// would be a second response).
    private var answeredError = false
    /// An answer with `Connection: close` went out: what the parser finds after it (a request pipelined
    /// after one that asked to close) is not answered.
    private var answeredClosing = false

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        // A connection that closed in the middle of a request (the parser's EOF error) gets no answer.
        // A peer that half-closed in the middle of a request is still there to read the 400.
        if !responseStarted && !answeredError && !answeredClosing && context.channel.isActive {
            let tooLarge = parserError == .headerOverflow
            let answer = ServerResponse.error(
                tooLarge ? 431 : 400, "INVALID_PARAM",
                tooLarge ? "request head too large or with too many fields" : "malformed HTTP request")
            var headers = HTTPHeaders()
            headers.add(name: "Connection", value: "close")
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: "\(answer.body.count)")
            context.triggerUserOutboundEvent(LingeringClose.Arm(), promise: nil)
            let head = HTTPResponseHead(
                version: .http1_1, status: HTTPResponseStatus(statusCode: answer.status), headers: headers)
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: answer.body)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            answeredError = true
        }
        // The decoder closes the channel next (lingering, as armed above).
        context.close(promise: nil)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !answeredError else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch unwrapOutboundIn(data) {
        case .head(let head):
            responseStarted = true
            if head.headers[canonicalForm: "connection"].contains(where: { $0.lowercased() == "close" }) {
                answeredClosing = true
            }
        case .end: responseStarted = false
        case .body: break
        }
        context.write(data, promise: promise)
    }
}
