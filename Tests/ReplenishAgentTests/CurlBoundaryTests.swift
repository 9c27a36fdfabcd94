import CCurl
import Testing

@testable import ReplenishAgent

/// libcurl's failures carried as typed `CurlError`s, and what the easy handle allows. (That every raw libcurl
/// call sits in `Sources/ReplenishAgent/Curl/` is `BoundaryTests`' job.)
@Suite struct CurlBoundaryTests {
    @Test func onlyGetsMayReuseAConnection() {
        #expect(CurlEasy.mayReuseConnection(.get))
        #expect(!CurlEasy.mayReuseConnection(.post))
        #expect(!CurlEasy.mayReuseConnection(.delete))
    }

    @Test func aRefusedConnectionIsATypedCurlError() throws {
        let port = try Harness.freePort()  // bound and released: nothing listens there
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
        }
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
