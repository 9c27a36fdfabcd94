import NIOCore
import NIOHTTP1
import NIOPosix

/// One HTTP/1.1 request on a connection of its own, through SwiftNIO's HTTP/1 client codec: the device's pairing
/// port speaks plain HTTP on the local network, often at an IPv6 link-local address with its zone
/// (`http://[fe80::1%25wlan0]:8642`), which Foundation's `URLSession` on Linux refuses as a bad URL.
enum PlainHTTP {
    struct Answer {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
    }

    /// The host, port and path of an `http://` URL; an IPv6 host in brackets, its zone written `%25` (RFC 6874).
    struct Target: Equatable {
        var host: String
        var port: Int
        var path: String
        /// The `Host` header: the URL's authority as written, the zone left out (RFC 9110 has no zone in it).
        var hostHeader: String

        init(url: String) throws {
            guard url.hasPrefix("http://") else { throw Failure("not an http:// URL: \(url)") }
            let rest = url.dropFirst("http://".count)
            let slash = rest.firstIndex(of: "/") ?? rest.endIndex
            let authority = rest[..<slash]
            path = slash == rest.endIndex ? "/" : String(rest[slash...])
            let hostPart: Substring
            let portPart: Substring?
            if authority.hasPrefix("[") {
                guard let close = authority.firstIndex(of: "]") else { throw Failure("no ] in \(url)") }
                hostPart = authority[authority.index(after: authority.startIndex)..<close]
                let after = authority[authority.index(after: close)...]
                guard after.isEmpty || after.hasPrefix(":") else { throw Failure("not a host and port: \(url)") }
                portPart = after.isEmpty ? nil : after.dropFirst()
                let zoneless = hostPart.split(separator: "%", maxSplits: 1).first.map(String.init) ?? ""
                hostHeader = "[\(zoneless)]"
                host = hostPart.replacingOccurrences(of: "%25", with: "%")
            } else {
                let parts = authority.split(separator: ":", omittingEmptySubsequences: false)
                guard parts.count <= 2 else { throw Failure("not a host and port: \(url)") }
                hostPart = parts[0]
                portPart = parts.count == 2 ? parts[1] : nil
                hostHeader = String(hostPart)
                host = String(hostPart)
            }
            guard !host.isEmpty else { throw Failure("no host in \(url)") }
            if let portPart {
                guard let number = Int(portPart), (1...65535).contains(number) else {
                    throw Failure("not a port: \(url)")
                }
                port = number
                hostHeader += ":\(number)"
            } else {
                port = 80
            }
        }
    }

    /// Sends one request and reads its whole answer (at most `limit` bytes of body) within `timeout`.
    static func send(
        _ method: HTTPMethod, _ url: String, headers extra: [(String, String)] = [], body: [UInt8]? = nil,
        timeout: TimeAmount, limit: Int = 1 << 20
    ) async throws -> Answer {
        let target = try Target(url: url)
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: target.path)
        head.headers.add(name: "Host", value: target.hostHeader)
        head.headers.add(name: "Connection", value: "close")
        head.headers.add(contentsOf: extra)
        if let body { head.headers.add(name: "Content-Length", value: "\(body.count)") }
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(timeout)
            .connect(host: target.host, port: target.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(
                        wrappingChannelSynchronously: channel)
                }
            }
        // The whole exchange within the timeout: the connection is closed when it runs out, which ends the read.
        let deadline = channel.channel.eventLoop.scheduleTask(in: timeout) { channel.channel.close(promise: nil) }
        defer { deadline.cancel() }
        return try await channel.executeThenClose { inbound, outbound in
            // The whole request in one write: a device that answers once it has the head (a 429) and closes would
            // otherwise close the channel under a second write ("I/O on closed channel"), and its answer be lost.
            var parts: [HTTPClientRequestPart] = [.head(head)]
            if let body { parts.append(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
            parts.append(.end(nil))
            try await outbound.write(contentsOf: parts)
            var answer = Answer(status: 0, headers: [:], body: [])
            for try await part in inbound {
                switch part {
                case .head(let responseHead):
                    answer.status = Int(responseHead.status.code)
                    answer.headers = responseHead.headers
                case .body(let buffer):
                    guard answer.body.count + buffer.readableBytes <= limit else {
                        throw Failure("\(method.rawValue) \(url): an answer over \(limit) bytes")
                    }
                    answer.body += Array(buffer.readableBytesView)
                case .end:
                    return answer
                }
            }
            throw Failure("\(method.rawValue) \(url): no whole answer within \(timeout.nanoseconds / 1_000_000_000) s")
        }
    }
}
