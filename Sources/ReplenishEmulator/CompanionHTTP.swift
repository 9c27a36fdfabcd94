import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// The `companion` command's HTTP client: one HTTP/1.1 request on a connection of its own (`Connection: close`),
/// through SwiftNIO's HTTP/1 client codec, waited for. Plain HTTP only (the emulator serves plain HTTP; a TLS
/// terminator in front of it is for the agent). Redirects are answers (the consent's `Location` carries the
/// code). Timeouts: 10 s to connect, 20 s for the whole exchange.
enum CompanionHTTP {
    struct Answer {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
        var bodyText: String { String(decoding: body, as: UTF8.self) }
        func header(_ name: String) -> String? { headers.first(name: name) }
    }

    static let connectSeconds: Int64 = 10
    /// For one whole exchange, connecting included.
    static let exchangeSeconds: Int64 = 20

    /// One request: its answer whatever the status, or `NoAnswer` (no connection, a timeout, the connection
    /// closed before a whole answer).
    static func send(_ method: String, _ url: String, headers extra: [(String, String)], body: [UInt8]?) throws
        -> Answer
    {
        guard let parsed = URLComponents(string: url), parsed.scheme == "http", let rawHost = parsed.host,
            !rawHost.isEmpty
        else {
            throw CompanionCommand.CompanionFailure(description: "not an http:// URL: \(url)")
        }
        // URLComponents keeps an IPv6 host's brackets and its zone percent-encoded (RFC 6874).
        let bracketed = rawHost.hasPrefix("[")
        let host = (bracketed ? String(rawHost.dropFirst().dropLast()) : rawHost)
            .replacingOccurrences(of: "%25", with: "%")
        let port = parsed.port ?? 80
        let zoneless = host.split(separator: "%", maxSplits: 1).first.map(String.init) ?? host
        var head = HTTPRequestHead(
            version: .http1_1, method: HTTPMethod(rawValue: method),
            uri: (parsed.percentEncodedPath.isEmpty ? "/" : parsed.percentEncodedPath)
                + (parsed.percentEncodedQuery.map { "?" + $0 } ?? ""))
        head.headers.add(name: "Host", value: (bracketed || host.contains(":") ? "[\(zoneless)]" : host) + ":\(port)")
        head.headers.add(name: "User-Agent", value: "replenish-emulator-companion")
        head.headers.add(name: "Connection", value: "close")
        head.headers.add(contentsOf: extra)
        if let body { head.headers.add(name: "Content-Length", value: "\(body.count)") }

        let group = MultiThreadedEventLoopGroup.singleton
        let promise = group.next().makePromise(of: Answer.self)
        let channel: any Channel
        do {
            channel = try ClientBootstrap(group: group)
                .connectTimeout(.seconds(connectSeconds))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(Collector(promise: promise))
                    }
                }
                .connect(host: host, port: port).wait()
        } catch {
            promise.fail(error)
            throw CompanionCommand.NoAnswer(description: "cannot connect for \(url): \(error)")
        }
        let deadline = channel.eventLoop.scheduleTask(in: .seconds(exchangeSeconds)) { channel.close(promise: nil) }
        defer { deadline.cancel() }
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if let body { channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil) }
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        do {
            return try promise.futureResult.wait()
        } catch {
            throw CompanionCommand.NoAnswer(
                description: "\(method) \(url): no whole answer within \(exchangeSeconds) s (\(error))")
        }
    }

    /// Collects one response; fails the promise if the connection ends first.
    private final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPClientResponsePart
        private let promise: EventLoopPromise<Answer>
        private var answer = Answer(status: 0, headers: [:], body: [])

        init(promise: EventLoopPromise<Answer>) { self.promise = promise }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch Self.unwrapInboundIn(data) {
            case .head(let head):
                answer.status = Int(head.status.code)
                answer.headers = head.headers
            case .body(let buffer):
                answer.body += Array(buffer.readableBytesView)
            case .end:
                promise.succeed(answer)
                context.close(promise: nil)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            promise.fail(ChannelError.eof)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            promise.fail(error)
            context.close(promise: nil)
        }
    }
}
