import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import ReplenishAgent

/// The agent's small HTTP server in-process, with its deadlines shortened (the same code the pairing port and
/// the control socket run with 10 s): a peer that trickles or stays silent is closed at the request deadline,
/// and a handler slower than the deadline still gets its answer out. The process-level test keeps the checks
/// that need the real port (the guards, the 413 to a blind upload, eviction).
@Suite(.serialized, .onOwnThread, .tags(.unit, .realTime)) struct LocalHTTPServerTests {
    static let deadline = 0.4

    /// Serves `handler` on a loopback port with a short request deadline; `body` gets the port.
    func withServer(
        handler: @escaping LocalHTTPServer.Handler = { _ in .noContent }, _ body: (Int) throws -> Void
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var limits = LocalHTTPServer.Limits()
        limits.requestDeadline = .milliseconds(Int64(Self.deadline * 1000))
        limits.lingerIdle = .milliseconds(200)
        let bound = Mutex<Int?>(nil)
        let server = Task {
            try await LocalHTTPServer.serve(
                at: .tcp(host: "127.0.0.1", port: 0), group: group, limits: limits,
                onBound: { port in bound.withLock { $0 = port } }, handler: handler)
        }
        defer { server.cancel() }
        let port = try await boundPort(bound)
        try body(port)
        server.cancel()
        _ = await server.result
        try await group.shutdownGracefully()
    }

    func boundPort(_ bound: borrowing Mutex<Int?>) async throws -> Int {
        for _ in 0..<500 {
            if let port = bound.withLock({ $0 }) { return port }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw AgentError(.network, "the server did not bind within 5 s")
    }

    @Test func aTricklingPeerAndASilentOneAreClosedAtTheRequestDeadline() async throws {
        try await withServer { port in
            let slow = try RawConnection(port: port)
            let started = Date()
            var closed = false
            for byte in "GET / HTTP/1.1\r\nX-Slow: " + String(repeating: "a", count: 40) where !closed {
                slow.send(String(byte))
                closed = slow.receive(within: 0.05)?.closed == true
            }
            let after = Date().timeIntervalSince(started)
            #expect(
                closed && after >= Self.deadline * 0.9 && after < Self.deadline + 1.5, "closed \(closed) at \(after) s")

            let silent = try RawConnection(port: port)
            let silentStarted = Date()
            #expect(silent.receive(within: 5)?.closed == true)
            #expect(Date().timeIntervalSince(silentStarted) >= Self.deadline * 0.9)
        }
    }

    @Test func theDeadlineTimesTheRequestNotTheAnswer() async throws {
        // The handler takes three deadlines (a simulated press held down): the answer still comes.
        let slowHandler: LocalHTTPServer.Handler = { _ in
            try? await Task.sleep(for: .milliseconds(Int64(Self.deadline * 3000)))
            return .json(200, ["ok": true])
        }
        try await withServer(handler: slowHandler) { port in
            let connection = try RawConnection(port: port)
            connection.send("GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let answer = connection.receive(within: 10)
            #expect(answer?.text.hasPrefix("HTTP/1.1 200") == true, "\(answer?.text.prefix(60) ?? "no answer")")
        }
    }

    @Test func aBodyOverTheLimitIsAnswered413() async throws {
        try await withServer { port in
            let connection = try RawConnection(port: port)
            connection.send(
                "POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
            )
            #expect(connection.receive(within: 5)?.text.hasPrefix("HTTP/1.1 413") == true)
        }
    }
}
