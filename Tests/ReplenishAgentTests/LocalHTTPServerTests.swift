import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import ReplenishAgent

/// The agent's small HTTP server on a real loopback port, in-process: the pipeline `LocalHTTPServer.addHandlers`
/// builds answers over a real socket, and a body over the limit gets its 413. Its deadlines and its lingering
/// close are tested on instants (`ConnectionTimingTests`) and in the same pipeline on NIO's `EmbeddedChannel`
/// with `advanceTime` (`ConnectionPipelineTests`); the process-level tests keep what needs the agent's real
/// ports (the guards, the 413 to a blind upload, eviction).
@Suite(.serialized, .tags(.unit)) struct LocalHTTPServerTests {
    /// Serves `handler` on a loopback port; `body` gets the port. `body` blocks on its socket, so it runs on a
    /// thread of its own: on the tests' cooperative pool (two threads on a two-core machine) it would hold one
    /// of the threads the handler needs, and with another suite holding the other, the answer would never come.
    func withServer(
        handler: @escaping LocalHTTPServer.Handler = { _ in .noContent },
        _ body: @escaping @Sendable (Int) throws -> Void
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let (bound, reportBound) = AsyncStream.makeStream(of: Int.self)
        let server = Task {
            try await LocalHTTPServer.serve(
                at: .tcp(host: "127.0.0.1", port: 0), group: group,
                onBound: { port in if let port { reportBound.yield(port) } }, handler: handler)
        }
        defer { server.cancel() }
        var ports = bound.makeAsyncIterator()
        guard let port = await ports.next() else { throw AgentError(.network, "the server did not bind") }
        let client = NIOThreadPool(numberOfThreads: 1)
        client.start()
        let result = await Result { try await client.runIfActive { try body(port) } }
        try await client.shutdownGracefully()
        try result.get()
        server.cancel()
        _ = await server.result
        try await group.shutdownGracefully()
    }

    @Test func aRequestIsAnsweredOverARealSocket() async throws {
        let answer: LocalHTTPServer.Handler = { _ in .json(200, ["ok": true]) }
        try await withServer(handler: answer) { port in
            let connection = try RawConnection(port: port)
            connection.send("GET /state HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
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
