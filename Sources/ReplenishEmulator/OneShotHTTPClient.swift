import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A minimal blocking HTTP/1.1 client for the `companion` command: one request per connection, never
/// follows redirects, a fixed deadline for the whole exchange.
final class OneShotHTTPClient {
    /// What came back.
    struct Exchange: Sendable {
        var status: Int
        var headers: [(name: String, value: String)]
        var body: [UInt8]

        func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        var bodyText: String { String(decoding: body, as: UTF8.self) }
    }

    /// Why a request did not get an answer.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let tls: NIOSSLContext
    private let timeout: TimeAmount

    /// - Parameter caFile: a PEM bundle to trust instead of the system's roots (for the emulator's own CA).
    init(caFile: String?, timeout: TimeAmount = .seconds(10)) throws {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile { configuration.trustRoots = .file(caFile) }
        configuration.applicationProtocols = ["http/1.1"]
        self.tls = try NIOSSLContext(configuration: configuration)
        self.timeout = timeout
    }

    deinit {
        try? group.syncShutdownGracefully()
    }

    func send(_ method: HTTPMethod, _ urlText: String, headers extra: [(String, String)] = [], body: [UInt8]? = nil)
        throws -> Exchange
    {
        guard let url = URL(string: urlText), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else { throw Failure(description: "not an http(s) URL: \(urlText)") }
        let secure = scheme == "https"
        let port = url.port ?? (secure ? 443 : 80)
        var target = url.path.isEmpty ? "/" : url.path
        if let encodedPath = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath,
            !encodedPath.isEmpty
        {
            target = encodedPath
        }
        if let query = url.query(percentEncoded: true) { target += "?" + query }

        var headers = HTTPHeaders()
        // An IPv6 literal is bracketed in Host, as in the URL.
        let hostHeader = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        headers.add(name: "Host", value: url.port.map { "\(hostHeader):\($0)" } ?? hostHeader)
        headers.add(name: "User-Agent", value: "replenish-emulator-companion")
        headers.add(name: "Connection", value: "close")
        for (name, value) in extra { headers.add(name: name, value: value) }
        if let body { headers.add(name: "Content-Length", value: String(body.count)) }
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: target, headers: headers)

        let loop = group.next()
        let promise = loop.makePromise(of: Exchange.self)
        let tls = secure ? self.tls : nil
        let isIPAddress = host.allSatisfy { $0.isNumber || $0 == "." || $0 == ":" }
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tls {
                        try sync.addHandler(
                            NIOSSLClientHandler(context: tls, serverHostname: isIPAddress ? nil : host))
                    }
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(ExchangeHandler(head: head, body: body, promise: promise))
                }
            }
        let channel: any Channel
        do {
            channel = try bootstrap.connect(host: host, port: port).wait()
        } catch {
            promise.fail(error)
            throw Failure(description: "cannot connect to \(host):\(port): \(error)")
        }
        let deadline = loop.scheduleTask(in: timeout) {
            promise.fail(Failure(description: "no answer from \(urlText) within the timeout"))
            channel.close(promise: nil)
        }
        defer {
            deadline.cancel()
            channel.close(promise: nil)
        }
        do {
            return try promise.futureResult.wait()
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(description: "\(method.rawValue) \(urlText) failed: \(error)")
        }
    }

    /// Sends the request once the channel is active and collects the answer.
    private final class ExchangeHandler: ChannelInboundHandler {
        typealias InboundIn = HTTPClientResponsePart
        typealias OutboundOut = HTTPClientRequestPart

        private let head: HTTPRequestHead
        private let body: [UInt8]?
        private let promise: EventLoopPromise<Exchange>
        private var response: HTTPResponseHead?
        private var collected: [UInt8] = []

        init(head: HTTPRequestHead, body: [UInt8]?, promise: EventLoopPromise<Exchange>) {
            self.head = head
            self.body = body
            self.promise = promise
        }

        func channelActive(context: ChannelHandlerContext) {
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            if let body, !body.isEmpty {
                var buffer = context.channel.allocator.buffer(capacity: body.count)
                buffer.writeBytes(body)
                context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            }
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            context.fireChannelActive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                response = head
            case .body(var buffer):
                if let bytes = buffer.readBytes(length: buffer.readableBytes) { collected += bytes }
            case .end:
                guard let response else { return }
                promise.succeed(
                    Exchange(
                        status: Int(response.status.code),
                        headers: response.headers.map { (name: $0.name, value: $0.value) }, body: collected))
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            promise.fail(Failure(description: "connection closed before a complete answer"))
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            promise.fail(error)
            context.close(promise: nil)
        }
    }
}
