import CCurl
import Foundation
import Testing

@testable import ReplenishAgent

/// The one typed C boundary for libcurl: every raw call in `Sources/ReplenishAgent/Curl/`, each unsafe pointer
/// use there explained, and libcurl's failures carried as typed `CurlError`s.
@Suite struct CurlBoundaryTests {
    static let sources = packageRoot() + "/Sources/ReplenishAgent"
    static let boundary = "Curl/"

    /// Every Swift file of the agent, as (path relative to `Sources/ReplenishAgent`, lines).
    static func agentSources() throws -> [(path: String, lines: [Substring])] {
        let enumerator = try #require(FileManager.default.enumerator(atPath: sources))
        var files: [(String, [Substring])] = []
        while let path = enumerator.nextObject() as? String {
            guard path.hasSuffix(".swift") else { continue }
            let text = try String(contentsOfFile: sources + "/" + path, encoding: .utf8)
            files.append((path, text.split(separator: "\n", omittingEmptySubsequences: false)))
        }
        return files
    }

    @Test func noRawLibcurlCallOutsideTheCurlFolder() throws {
        let files = try Self.agentSources()
        #expect(files.count > 20, "the agent's sources were not found at \(Self.sources)")
        #expect(
            files.contains {
                $0.path.hasPrefix(Self.boundary) && $0.lines.contains { $0.contains("curl_easy_perform(") }
            })
        var offenders: [String] = []
        for file in files where !file.path.hasPrefix(Self.boundary) {
            for (number, line) in file.lines.enumerated() {
                // Any libcurl function (curl_…, and the CCurl wrappers ccurl_…), and the module itself.
                if line.contains("curl_") || line.contains("import CCurl") || line.contains("CURLOPT_") {
                    offenders.append("\(file.path):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(
            offenders.isEmpty, "raw libcurl outside Sources/ReplenishAgent/Curl/:\n\(offenders.joined(separator: "\n"))"
        )
    }

    @Test func everyUnsafePointerUseInTheCurlFolderSaysWhyItIsSafe() throws {
        let files = try Self.agentSources().filter { $0.path.hasPrefix(Self.boundary) }
        #expect(!files.isEmpty)
        let markers = ["Unsafe", "Unmanaged", ".allocate(", ".deallocate(", "curl_free(", "curl_slist_free_all("]
        var unexplained: [String] = []
        for file in files {
            for (number, line) in file.lines.enumerated()
            where markers.contains(where: line.contains) && !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                // The line itself or one of the three above it carries the `// SAFETY:` comment.
                let window = file.lines[max(0, number - 3)...number]
                if !window.contains(where: { $0.contains("SAFETY:") }) {
                    unexplained.append("\(file.path):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(
            unexplained.isEmpty, "unsafe pointer use without a SAFETY comment:\n\(unexplained.joined(separator: "\n"))")
    }

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
