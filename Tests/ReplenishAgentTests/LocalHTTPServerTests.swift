import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import ReplenishAgent

/// The pairing port is reachable from the whole local network: no peer may hold it. Real sockets on loopback,
/// waits are bounded polls.
@Suite struct LocalHTTPServerTests {
    /// A raw TCP connection to loopback, for peers that do not behave like HTTP clients.
    final class RawConnection {
        let fd: Int32

        init(port: Int) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(port).bigEndian
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { throw AgentError(.network, "connect: \(errno)") }
        }

        deinit { close(fd) }

        func send(_ text: String) { _ = text.withCString { write(fd, $0, strlen($0)) } }

        /// What arrives within `seconds`, up to the peer closing: nil when nothing came and it stayed open.
        func receive(within seconds: Double) -> (text: String, closed: Bool)? {
            var received: [UInt8] = []
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 50) > 0 else { continue }
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = read(fd, &buffer, buffer.count)
                if count <= 0 { return (String(decoding: received, as: UTF8.self), true) }
                received += buffer[0..<count]
                if String(decoding: received, as: UTF8.self).contains("\r\n\r\n") {
                    return (String(decoding: received, as: UTF8.self), false)
                }
            }
            return received.isEmpty ? nil : (String(decoding: received, as: UTF8.self), false)
        }
    }

    @Test func capsConnectionsClosesIdleOnesAndRefusesABigBodyAtOnce() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bound = Mutex<Int?>(nil)
        let server = Task {
            try await LocalHTTPServer.serve(
                at: .tcp(host: "127.0.0.1", port: 0), group: group, maximumBodyBytes: 1024, maximumConnections: 2,
                idleTimeout: .seconds(2), onBound: { port in bound.withLock { $0 = port } }
            ) { _ in ServerResponse(status: 200, body: Array("ok".utf8)) }
        }
        defer { server.cancel() }
        var port = 0
        for _ in 0..<200 where port == 0 {
            port = bound.withLock { $0 } ?? 0
            try await Task.sleep(for: .milliseconds(10))
        }
        try #require(port > 0)
        let get = { try CurlEasy(options: .init()).perform(HTTPRequest(method: .get, url: "http://127.0.0.1:\(port)/x")) }

        // Two peers that connect and say nothing fill the server: a third connection is closed unanswered.
        let first = try RawConnection(port: port)
        let second = try RawConnection(port: port)
        #expect(throws: AgentError.self) { try get() }
        // Both silent peers are dropped after the idle timeout; then the server answers again.
        #expect(first.receive(within: 5)?.closed == true)
        #expect(second.receive(within: 5)?.closed == true)
        // The slots are freed just after the sockets close (the serving task ends): poll, bounded.
        var status: Int?
        let deadline = Date().addingTimeInterval(5)
        while status == nil, Date() < deadline {
            status = try? get().status
            if status == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(status == 200)

        // A body over the cap is answered 413 as soon as the cap is passed, without waiting for the rest.
        let big = try RawConnection(port: port)
        big.send("POST /provision/companionInfo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
        big.send(String(repeating: "x", count: 2048))
        let answer = big.receive(within: 5)
        #expect(answer?.text.hasPrefix("HTTP/1.1 413") == true, "\(answer?.text ?? "no answer")")
        server.cancel()
        _ = try? await server.value
        try await group.shutdownGracefully()
    }
}
