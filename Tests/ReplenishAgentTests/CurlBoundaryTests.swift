import CCurl
import Foundation
import Testing

@testable import ReplenishAgent

/// libcurl's failures carried as typed `CurlError`s, and what the easy handle allows. (That every raw libcurl
/// call sits in `Sources/ReplenishAgent/Curl/` is `BoundaryTests`' job.)
@Suite(.tags(.unit)) struct CurlBoundaryTests {
    @Test func onlyGetsMayReuseAConnection() {
        #expect(CurlEasy.mayReuseConnection(.get))
        #expect(!CurlEasy.mayReuseConnection(.post))
        #expect(!CurlEasy.mayReuseConnection(.delete))
    }

    @Test func aRefusedConnectionIsATypedCurlError() throws {
        let port = try FreePorts.take()  // bound and released: nothing listens there
        do {
            _ = try CurlEasy(options: .init()).perform(HTTPRequest(method: .post, url: "http://127.0.0.1:\(port)/x"))
            Issue.record("a request to a closed port succeeded")
        } catch {
            #expect(error.code == .network)
            let curl = try #require(error.curl)
            #expect(curl.kind == .easy)
            #expect(curl.code == CurlError.couldNotConnect)
            #expect(curl.operation == "POST http://127.0.0.1:\(port)/x")
            #expect(!curl.text.isEmpty)
            // Nothing left the device: not "sent, answer unknown" (#19.1).
            #expect(!curl.requestSent)
            #expect(error.requestNeverSent)
        }
    }

    /// A loopback listener that takes one connection, reads the request, calls `afterReading`, and then closes
    /// (`closeAfterReading`) or holds the connection open without a word until the test ends.
    final class SilentServer: @unchecked Sendable {
        let port: Int
        private let listener: Int32
        private var thread: Thread?

        init(closeAfterReading: Bool, afterReading: @escaping @Sendable () -> Void = {}) throws {
            listener = socket(AF_INET, streamSocket, 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let fd = listener
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &length) == 0
                }
            }
            guard bound else { throw AgentError(.network, "no listener") }
            port = Int(UInt16(bigEndian: address.sin_port))
            let thread = Thread {
                let connection = accept(fd, nil, nil)
                guard connection >= 0 else { return }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = read(connection, &buffer, buffer.count)
                afterReading()
                if closeAfterReading { close(connection) }
            }
            thread.start()
            self.thread = thread
        }

        deinit { close(listener) }
    }

    @Test func aRequestThatReachedTheServerCountsAsSent() throws {
        let server = try SilentServer(closeAfterReading: true)
        do {
            _ = try CurlEasy(options: .init()).perform(
                HTTPRequest(method: .post, url: "http://127.0.0.1:\(server.port)/replenish/slot-1", body: [1]))
            Issue.record("a request the server never answered succeeded")
        } catch {
            #expect(error.curl?.code == CurlError.gotNothing)
            #expect(error.curl?.requestSent == true)
            #expect(!error.requestNeverSent)
        }
    }

    /// #19.5: a transfer waiting for an answer that never comes ends soon after its abort flag is set, and
    /// counts as sent (the server had the request).
    @Test func anAbortedTransferEndsAtOnceAndCountsAsSent() throws {
        let abort = TransferAbort()
        // Aborted once the server has the request: the transfer is then waiting for an answer.
        let server = try SilentServer(closeAfterReading: false) { abort.abort() }
        let started = ContinuousClock.now
        do {
            _ = try CurlEasy(options: .init()).perform(
                HTTPRequest(
                    method: .post, url: "http://127.0.0.1:\(server.port)/replenish/slot-1", body: [1],
                    timeoutSeconds: 30),
                abort: abort)
            Issue.record("a request the server never answered succeeded")
        } catch {
            #expect(error.curl?.code == Int(CURLE_ABORTED_BY_CALLBACK.rawValue))
            #expect(error.curl?.requestSent == true)
        }
        #expect(started.duration(to: .now) < .seconds(5), "the 30 s transfer did not end on its abort")
    }

    @Test func onlyHTTPAndHTTPSAreSpoken() throws {
        for url in ["file:///etc/passwd", "ftp://127.0.0.1:1/x", "gopher://127.0.0.1:1/x"] {
            do {
                _ = try CurlEasy(options: .init()).perform(HTTPRequest(method: .get, url: url))
                Issue.record("\(url) was fetched")
            } catch {
                #expect(error.curl?.code == Int(CURLE_UNSUPPORTED_PROTOCOL.rawValue), "\(url): \(error)")
            }
        }
    }

    @Test func anUnparsableURLCarriesLibcurlsURLCode() throws {
        do {
            _ = try EndpointURL("http://[::1")
            Issue.record("a malformed URL was accepted")
        } catch {
            #expect(error.code == .configuration)
            let curl = try #require(error.curl)
            #expect(curl.kind == .url)
            #expect(curl.code != 0)
        }
        // Checks the agent makes on top of the parser carry no libcurl cause.
        do {
            _ = try EndpointURL("http://example.com/token")
            Issue.record("http:// to a remote host was accepted")
        } catch { #expect(error.code == .configuration && error.curl == nil) }
    }

    @Test func formEscapingLeavesOnlyUnreservedCharacters() {
        #expect(CurlEasy.formEscape("Atzr|a b&c=d+e\r\n~._-") == "Atzr%7Ca%20b%26c%3Dd%2Be%0D%0A~._-")
    }
}
