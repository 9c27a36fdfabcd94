import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import ReplenishAgent

/// The local server's connection pipeline (`LocalHTTPServer.addHandlers`: the lingering close, SwiftNIO's
/// parser, the error answers, the request deadline) on an `EmbeddedChannel`, whose clock moves only by
/// `advanceTime`: the deadlines at their real lengths (10 s, 5 s, 30 s), and no waiting. The test plays the
/// peer (bytes in) and the request handler (request parts out, answer parts in).
@Suite(.tags(.unit)) struct ConnectionPipelineTests {
    /// Stands for the socket at the pipeline's head: an `EmbeddedChannel` closes altogether on any close,
    /// where a socket can shut down its sending side alone (which the lingering close does).
    final class SocketHalfClose: ChannelOutboundHandler {
        typealias OutboundIn = IOData
        private(set) var outputShutDown = false

        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            guard mode == .output else {
                context.close(mode: mode, promise: promise)
                return
            }
            outputShutDown = true
            promise?.succeed()
        }
    }

    /// One connection through the server's pipeline with `limits`, opened at the embedded clock's instant zero.
    final class Connection {
        let channel = EmbeddedChannel()
        let socket = SocketHalfClose()

        init(limits: LocalHTTPServer.Limits = LocalHTTPServer.Limits()) throws {
            try channel.pipeline.syncOperations.addHandler(socket)
            try LocalHTTPServer.addHandlers(
                to: channel.pipeline.syncOperations, limits: limits, tracker: LocalHTTPServer.ConnectionTracker())
            channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 4000), promise: nil)
        }

        // A test that failed may leave the connection open; closed, it sets no timers, and an embedded loop must
        // not go with timers set.
        deinit {
            if channel.isActive {
                channel.pipeline.syncOperations.triggerUserOutboundEvent(LingeringClose.CloseNow(), promise: nil)
            }
            channel.embeddedEventLoop.run()
        }

        var isOpen: Bool { channel.isActive }

        func advance(_ amount: TimeAmount) { channel.embeddedEventLoop.advanceTime(by: amount) }

        /// Open for `milliseconds` less one, closed at exactly `milliseconds` from now.
        func expectClosed(after milliseconds: Int64, sourceLocation: SourceLocation = #_sourceLocation) {
            advance(.milliseconds(milliseconds - 1))
            #expect(isOpen, "closed before \(milliseconds) ms", sourceLocation: sourceLocation)
            advance(.milliseconds(1))
            #expect(!isOpen, "open at \(milliseconds) ms", sourceLocation: sourceLocation)
        }

        /// Bytes from the peer.
        func send(_ text: String) throws { try channel.writeInbound(ByteBuffer(string: text)) }

        /// What reached the request handler.
        func received() throws -> HTTPServerRequestPart? { try channel.readInbound(as: HTTPServerRequestPart.self) }

        /// Sends `text` and reads the request head it starts with; the test stops, failed, without one.
        func sendExpectingHead(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            try send(text)
            let part = try received()
            var isHead = false
            if case .head = part { isHead = true }
            try #require(isHead, "no request head: \(String(describing: part))", sourceLocation: sourceLocation)
        }

        /// The request handler's answer.
        func answer(_ status: HTTPResponseStatus) throws {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Length", value: "0")
            try channel.writeOutbound(
                HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers)))
            try channel.writeOutbound(HTTPServerResponsePart.end(nil))
        }

        /// Everything the server wrote to the peer since the last call, as text.
        func sent() throws -> String {
            var text = ""
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
            return text
        }
    }

    @Test func aTrickledRequestIsClosedAtTheDeadlineOfTheConnectionsStart() throws {
        let connection = try Connection()
        // A byte every half second for 9.5 s never makes the request whole, and the bytes do not move the deadline.
        for byte in "GET / HTTP/1.1\r\nX-Slow: aaaa".utf8.prefix(19) {
            try connection.channel.writeInbound(ByteBuffer(bytes: [byte]))
            connection.advance(.milliseconds(500))
        }
        #expect(try connection.received() == nil)
        connection.expectClosed(after: 500)
    }

    @Test func aTrickledBodyIsClosedAtTheDeadlineThoughEachByteReachesTheHandler() throws {
        let connection = try Connection()
        try connection.sendExpectingHead("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        for _ in 0..<19 {
            try connection.send("a")
            #expect(try connection.received() != nil)
            connection.advance(.milliseconds(500))
        }
        connection.expectClosed(after: 500)
    }

    @Test func aSilentPeerIsClosedAtTheDeadlineToTheNanosecond() throws {
        let connection = try Connection()
        connection.advance(.nanoseconds(9_999_999_999))
        #expect(connection.isOpen)
        connection.advance(.nanoseconds(1))
        #expect(!connection.isOpen)
    }

    @Test func aRequestAnsweredLateIsNotClosedWhileItIsAnswered() throws {
        let connection = try Connection()
        try connection.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        guard case .head(let head) = try connection.received() else {
            Issue.record("no request head")
            return
        }
        #expect(head.uri == "/slow")
        #expect(try connection.received() == .end(nil))
        // Three deadlines pass while the request is being answered (a held press): the connection stays.
        connection.advance(.seconds(30))
        #expect(connection.isOpen)
        try connection.answer(.ok)
        #expect(try connection.sent().hasPrefix("HTTP/1.1 200 OK"))
        // The next request is owed within the deadline of the answer's end.
        connection.expectClosed(after: 10_000)
    }

    /// Requests pipelined on one connection reach the handler one at a time, in order: the next only once the
    /// previous answer's end is out, whether it came in the same read or while the previous one was answered;
    /// one that came before the peer half-closed is still answered.
    @Test func pipelinedRequestsReachTheHandlerOneAtATimeInOrder() throws {
        let connection = try Connection()
        func expectRequest(_ uri: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            guard case .head(let head) = try connection.received() else {
                Issue.record("no request head for \(uri)", sourceLocation: sourceLocation)
                return
            }
            #expect(head.uri == uri, sourceLocation: sourceLocation)
            #expect(try connection.received() == .end(nil), sourceLocation: sourceLocation)
            #expect(try connection.received() == nil, "one request at a time", sourceLocation: sourceLocation)
        }
        try connection.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        try expectRequest("/a")
        // Sent while /a is being answered, split across reads.
        try connection.send("GET /c HTTP/1.1\r\nHo")
        try connection.send("st: x\r\n\r\n")
        #expect(try connection.received() == nil)
        try connection.answer(.notFound)
        try expectRequest("/b")
        connection.channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        try connection.answer(.notFound)
        try expectRequest("/c")
        try connection.answer(.notFound)
        #expect(try connection.sent().components(separatedBy: "HTTP/1.1 404").count == 4)
        #expect(connection.isOpen)
    }

    /// When the server stops (`Drain`), a connection answers what it has received, pipelined requests included,
    /// and then closes: its sending side shuts down once the last answer is out. An idle one closes at once.
    @Test func aStoppingServerAnswersWhatWasPipelinedThenCloses() throws {
        let connection = try Connection()
        try connection.sendExpectingHead("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try connection.received() == .end(nil))
        connection.channel.pipeline.syncOperations.triggerUserOutboundEvent(RequestDeadline.Drain(), promise: nil)
        try connection.answer(.noContent)
        guard case .head(let second) = try connection.received() else {
            Issue.record("the pipelined request did not reach the handler")
            return
        }
        #expect(second.uri == "/b")
        #expect(!connection.socket.outputShutDown)
        try connection.answer(.notFound)
        #expect(try connection.sent().components(separatedBy: "HTTP/1.1 ").count == 3)
        #expect(connection.socket.outputShutDown)
        connection.channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(!connection.isOpen)

        let idle = try Connection()
        idle.channel.pipeline.syncOperations.triggerUserOutboundEvent(RequestDeadline.Drain(), promise: nil)
        #expect(idle.socket.outputShutDown)
    }

    @Test func afterAnErrorAnswerTheConnectionLingersUntilThePeerIsIdleThenCloses() throws {
        let connection = try Connection()
        try connection.send("GET / HTTP/1.1\r\nBad Header: x\r\n\r\n")
        #expect(try connection.sent().hasPrefix("HTTP/1.1 400 Bad Request"))
        // The answer is out and the sending side shut down, but the connection still reads.
        #expect(connection.socket.outputShutDown)
        #expect(connection.isOpen)
        connection.advance(.seconds(3))
        try connection.send("GET /more HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try connection.received() == nil)
        #expect(try connection.sent().isEmpty)
        // Five seconds without a byte: from the last one at 3 s, not from the answer.
        connection.expectClosed(after: 5_000)
    }

    @Test func aPeerThatKeepsSendingAfterAnErrorAnswerIsClosedAtTheLingeringTime() throws {
        // A request deadline longer than the lingering time, so that the lingering time is what ends it.
        var limits = LocalHTTPServer.Limits()
        limits.requestDeadline = .seconds(60)
        let connection = try Connection(limits: limits)
        try connection.send("GET / HTTP/1.1\r\nBad Header: x\r\n\r\n")
        #expect(try connection.sent().hasPrefix("HTTP/1.1 400"))
        for _ in 0..<7 {
            connection.advance(.seconds(4))
            #expect(connection.isOpen)
            try connection.send("x")
        }
        connection.expectClosed(after: 2_000)
    }

    @Test func aPeerThatClosesItsSideEndsTheLingeringCloseAtOnce() throws {
        let connection = try Connection()
        try connection.send("GET / HTTP/1.1\r\nBad Header: x\r\n\r\n")
        #expect(try connection.sent().hasPrefix("HTTP/1.1 400"))
        #expect(connection.isOpen)
        connection.channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(!connection.isOpen)
    }
}
