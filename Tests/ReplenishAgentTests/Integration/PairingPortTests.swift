import Foundation
import Testing

@testable import ReplenishAgent

/// The real agent's pairing port is reachable from the whole local network: no peer may hold it, make it
/// hold memory, or reach the endpoints from a web page. Raw sockets on loopback against the running binary;
/// every wait is bounded.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct PairingPortTests {
    static let host = "Host: 127.0.0.1"

    /// Sends `request` on a fresh connection and returns the status line's code ("" when none came).
    func status(_ port: Int, _ request: String, source: String? = nil) throws -> String {
        let connection = try RawConnection(port: port, source: source)
        connection.send(request)
        let answer = connection.receive(within: 10)?.text ?? ""
        return answer.hasPrefix("HTTP/1.1 ") ? String(answer.dropFirst(9).prefix(3)) : answer
    }

    /// The emulator (slot `slot-1`) and an unpaired agent whose pairing port answers.
    func startUnpairedAgent() throws -> (Harness, emulator: String, port: Int, config: String, agent: Process) {
        let harness = Harness()
        let (emulator, port, config, agent) = try harness.startUnpairedAgent(setupKey: false)
        return (harness, emulator, port, config, agent)
    }

    @Test func everyBadClientGetsItsAnswerOrIsClosedAndThePortKeepsServing() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator()
        let port = try FreePorts.take()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: port)
        let agent = try harness.startAgent(config: config)
        let deviceInfo = {
            try CurlEasy(options: .init()).perform(
                HTTPRequest(method: .get, url: "http://127.0.0.1:\(port)/provision/deviceInfo"))
        }
        try harness.waitUntil("the pairing endpoints") { Harness.pairingPortAnswers(port) }

        // Eight silent connections from one address fill its share; a ninth from it evicts the oldest silent
        // one and is served at once; the other seven stay open.
        let silent = try (0..<8).map { _ in try RawConnection(port: port) }
        #expect(silent.allSatisfy { $0.receive(within: 0.25) == nil })
        #expect(try deviceInfo().status == 200)
        #expect(silent[0].receive(within: 5)?.closed == true)
        #expect(silent[1...].allSatisfy { $0.receive(within: 0.25) == nil })
        // Another address is not held back by them.
        #expect(try status(port, "GET / HTTP/1.1\r\n\(Self.host)\r\n\r\n", source: "127.0.0.9") == "404")

        // The guard: a Host that is not the device, an Origin, a POST that is not JSON.
        let info = "GET /provision/deviceInfo HTTP/1.1\r\n"
        #expect(try status(port, info + "Host: attacker.example:\(port)\r\n\r\n") == "421")
        #expect(try status(port, info + "\(Self.host)\r\nOrigin: http://attacker.example\r\n\r\n") == "403")
        #expect(
            try status(
                port,
                "POST /provision/companionInfo HTTP/1.1\r\n\(Self.host)\r\nContent-Type: text/plain\r\n"
                    + "Content-Length: 2\r\n\r\n{}") == "415")
        // Heads over the limits: 65 fields, or 9 KiB in one field.
        let fields = (0..<65).map { "X-F\($0): v\r\n" }.joined()
        #expect(try status(port, "GET / HTTP/1.1\r\n\(Self.host)\r\n\(fields)\r\n") == "431")
        let long = String(repeating: "a", count: 9 * 1024)
        #expect(try status(port, "GET / HTTP/1.1\r\n\(Self.host)\r\nX-Long: \(long)\r\n\r\n") == "431")
        #expect(try status(port, "\u{1}\u{2}garbage\r\n\r\n") == "400")

        // A declared body over 64 KiB is answered 413 at once, before any of it is sent.
        let head = "POST /provision/companionInfo HTTP/1.1\r\n\(Self.host)\r\nContent-Type: application/json\r\n"
        #expect(try status(port, head + "Content-Length: 1000000\r\n\r\n") == "413")
        // A blind 5 MB upload gets the whole 413 (lingering close), not a reset.
        let blind = try RawConnection(port: port)
        blind.send(head + "Content-Length: 5000000\r\n\r\n")
        let uploaded = blind.sendAll([UInt8](repeating: UInt8(ascii: "x"), count: 5_000_000))
        let answer = blind.receive(within: 10)
        #expect(uploaded, "the server must read the upload until it is done")
        #expect(answer?.text.hasPrefix("HTTP/1.1 413") == true, "\(answer?.text.prefix(80) ?? "no answer")")
        // The same through libcurl, which stops uploading when the answer comes.
        let curled = try CurlEasy(options: .init()).perform(
            HTTPRequest(
                method: .post, url: "http://127.0.0.1:\(port)/provision/companionInfo",
                headers: [("Content-Type", "application/json")], body: [UInt8](repeating: 120, count: 5_000_000)))
        #expect(curled.status == 413)

        // The request deadline (a trickling or silent peer closed, a slow answer still sent) is the server's
        // code with its limits: `LocalHTTPServerTests` runs it with the deadline shortened.
        #expect([200, 429].contains(try deviceInfo().status))
        #expect(agent.isRunning)
        harness.expectNoSecretsInAgentOutput()
    }

    /// The window's port as a process shows it: open at the start of an unpaired device, closed (refused, not
    /// answered) once paired, open again after a reset. When it closes on time and how a long press opens it
    /// are `PairingWindow`'s rules, tested on the manual clock (`PairingWindowTests`).
    @Test func theWindowIsOpenAtStartClosedOncePairedAndOpenAgainAfterAReset() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--slots", "slot-1"])
        let port = try FreePorts.take()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: port, pairingWindowMinutes: 1)
        let started = Date()
        try harness.startAgent(config: config)
        try harness.waitUntil("the pairing endpoints") { Harness.pairingPortAnswers(port) }
        let up = Date()
        let window = { try harness.statusJSON(config: config)["pairingWindow"] as? [String: Any] ?? [:] }
        #expect(try window()["open"] as? Bool == true)
        // Closes a minute after it opened (the configured length), as an ISO 8601 time in whole seconds: it opened
        // between the spawn and the port's first answer, however long a loaded machine took to start the agent.
        let closesAt = try #require(try window()["closesAt"] as? String)
        let closes = try #require(ISO8601DateFormatter().date(from: closesAt))
        #expect(closes.timeIntervalSince(started) > 55 && closes.timeIntervalSince(up) <= 61, "\(closesAt)")
        try harness.waitUntil("the LED") { try led(harness) == "pairingMode" }

        // Paired: the port is closed (refused, not answered) and the status says so.
        try harness.pair(emulator: emulator, pairingPort: port)
        try harness.waitUntil("the port to close once paired") { !Harness.pairingPortAnswers(port) }
        #expect(throws: AgentError.self) { try RawConnection(port: port) }
        let status = try harness.statusJSON(config: config)
        #expect(status["paired"] as? Bool == true)
        #expect((status["pairingWindow"] as? [String: Any])?["open"] as? Bool == false)
        #expect((status["pairingWindow"] as? [String: Any])?["closesAt"] is NSNull)
        try harness.waitUntil("the LED") { try led(harness) != "pairingMode" }

        // A factory reset (the next owner) opens it again.
        let reset = try harness.run("replenish-agent", ["reset", "--config", config])
        #expect(reset.status == 0, "\(reset.output)\(reset.error)")
        try harness.waitUntil("the pairing endpoints again") { Harness.pairingPortAnswers(port) }
        // The status file is written in its own task: it may follow the port by an fsync.
        try harness.waitUntil("status to show the window open again") { try window()["open"] as? Bool == true }
        try harness.waitUntil("the LED") { try led(harness) == "pairingMode" }
        harness.expectNoSecretsInAgentOutput()
    }

    /// Three requests in one write are answered in order at once (not after the 10 s request deadline; the
    /// bounds below are 6 s, which tells the two apart with room for a loaded machine); a
    /// request that asks to close is answered and the connection ends at once; a client that half-closes (`shutdown(SHUT_WR)`) after its request still gets the answer, the companion's
    /// 204 included, and one that half-closes without a request is closed at once.
    @Test func pipelinedRequestsAreAnsweredInOrderAndAHalfClosedClientGetsItsAnswer() throws {
        let (harness, emulator, port, config, agent) = try startUnpairedAgent()

        let pipelined = try RawConnection(port: port)
        let started = Date()
        pipelined.send(
            "GET /a HTTP/1.1\r\n\(Self.host)\r\n\r\n" + "GET /provision/companionInfo HTTP/1.1\r\n\(Self.host)\r\n\r\n"
                + "GET /b HTTP/1.1\r\n\(Self.host)\r\n\r\n")
        let answered = pipelined.receiveAnswers(3, within: 8)
        let elapsed = Date().timeIntervalSince(started)
        #expect(
            answered.answers.map(\.status) == [404, 405, 404] && elapsed < 6,
            "pipelined: \(answered.answers.map(\.status)) in \(elapsed) s, closed \(answered.closed)")

        // A request that asks to close (`Connection: close`, or HTTP/1.0 without keep-alive) is answered with
        // `Connection: close` and the connection ends at once; what was pipelined after it is not answered.
        let closing = try RawConnection(port: port)
        let closingStarted = Date()
        closing.send(
            "GET /a HTTP/1.1\r\n\(Self.host)\r\nConnection: close\r\n\r\n" + "GET /b HTTP/1.1\r\n\(Self.host)\r\n\r\n")
        let closed = closing.receiveAnswers(2, within: 8)
        #expect(
            closed.answers.map(\.status) == [404] && closed.closed
                && closed.answers[0].head.lowercased().contains("connection: close")
                && Date().timeIntervalSince(closingStarted) < 6,
            "Connection: close: \(closed.answers.map(\.status)), closed \(closed.closed)")
        let http10 = try RawConnection(port: port)
        http10.send("GET /a HTTP/1.0\r\n\(Self.host)\r\n\r\n")
        let answered10 = http10.receiveAnswers(2, within: 5)
        #expect(
            answered10.answers.map(\.status) == [404] && answered10.closed,
            "HTTP/1.0: \(answered10.answers.map(\.status)), closed \(answered10.closed)")

        // Two requests, then a half-close: both answered, then the connection ends.
        let halfClosed = try RawConnection(port: port)
        halfClosed.send("GET /a HTTP/1.1\r\n\(Self.host)\r\n\r\nGET /b HTTP/1.1\r\n\(Self.host)\r\n\r\n")
        halfClosed.shutdownWrite()
        let halfAnswered = halfClosed.receiveAnswers(2, within: 8)
        #expect(
            halfAnswered.answers.map(\.status) == [404, 404],
            "half-closed: \(halfAnswered.answers.map(\.status)), closed \(halfAnswered.closed)")
        #expect(halfClosed.receive(within: 3)?.closed == true, "closed after its answers")

        // A half-close without a request: closed at once, with nothing said.
        let silent = try RawConnection(port: port)
        silent.shutdownWrite()
        let silentStarted = Date()
        let silentEnd = silent.receive(within: 8)
        #expect(silentEnd?.closed == true && silentEnd?.text == "" && Date().timeIntervalSince(silentStarted) < 6)

        // The companion half-closes after sending companionInfo: it gets its 204, and the device is paired.
        let info = try deviceInfo(port)
        let code = try consent(emulator: emulator, info: info)
        let companion = try RawConnection(port: port)
        companion.send(companionInfoRequest(info: info, code: code))
        companion.shutdownWrite()
        let paired = companion.receiveAnswers(1, within: 20)
        #expect(
            paired.answers.first?.status == 204,
            "companionInfo: \(paired.answers.map(\.status)), closed \(paired.closed)")
        try harness.waitUntil("paired") { try harness.statusJSON(config: config)["paired"] as? Bool == true }
        #expect(agent.isRunning)
        harness.expectNoSecretsInAgentOutput()
    }

    /// Requests pipelined after the companionInfo that pairs the device are answered too, in order, before the
    /// port closes: the 204, then "already paired" (issue 29, item 8: the 204 closed the pairing window, whose
    /// server closed every connection at once, and what was pipelined after it was closed unanswered).
    @Test func requestsPipelinedAfterThePairingCompanionInfoAreAnswered() throws {
        let (harness, emulator, port, config, agent) = try startUnpairedAgent()
        let info = try deviceInfo(port)
        let code = try consent(emulator: emulator, info: info)
        let companion = try RawConnection(port: port)
        companion.send(
            companionInfoRequest(info: info, code: code) + "GET /a HTTP/1.1\r\n\(Self.host)\r\n\r\n"
                + "GET /provision/deviceInfo HTTP/1.1\r\n\(Self.host)\r\n\r\n")
        let answered = companion.receiveAnswers(3, within: 20)
        #expect(
            answered.answers.map(\.status) == [204, 404, 404],
            "pipelined after companionInfo: \(answered.answers.map(\.status)), closed \(answered.closed)")
        #expect(companion.receive(within: 5)?.closed == true, "closed after its answers")
        try harness.waitUntil("paired") { try harness.statusJSON(config: config)["paired"] as? Bool == true }
        #expect(agent.isRunning)
        harness.expectNoSecretsInAgentOutput()
    }

    /// 300 one-shot deviceInfo requests from 300 addresses of two other networks (127.0.1.0/24 and
    /// 127.0.2.0/24) while the phone (127.0.0.2) is at LWA: the phone's session survives and it pairs.
    @Test func aFloodFromManyAddressesOfOtherNetworksLeavesThePhonesSession() throws {
        let (harness, emulator, port, config, agent) = try startUnpairedAgent()

        let phone = "127.0.0.2"
        let info = try deviceInfo(port, source: phone)
        let code = try consent(emulator: emulator, info: info)
        // Each address is its own peer to the server: every one of them starts a session (none is refused 429).
        var started = 0
        for index in 0..<300 {
            let flood = try RawConnection(port: port, source: "127.0.\(1 + index / 150).\(1 + index % 150)")
            flood.send("GET /provision/deviceInfo HTTP/1.1\r\n\(Self.host)\r\n\r\n")
            if flood.receiveAnswers(1, within: 5).answers.first?.status == 200 { started += 1 }
        }
        #expect(started == 300)

        let companion = try RawConnection(port: port, source: phone)
        companion.send(companionInfoRequest(info: info, code: code))
        let answer = companion.receiveAnswers(1, within: 20).answers.first
        #expect(answer?.status == 204, "companionInfo: \(answer?.status ?? 0) \(answer?.body.prefix(120) ?? "")")
        try harness.waitUntil("paired") { try harness.statusJSON(config: config)["paired"] as? Bool == true }
        #expect(agent.isRunning)
        harness.expectNoSecretsInAgentOutput()
    }

    /// deviceInfo's answer, from `source`.
    func deviceInfo(_ port: Int, source: String? = nil) throws -> [String: Any] {
        let connection = try RawConnection(port: port, source: source)
        connection.send("GET /provision/deviceInfo HTTP/1.1\r\n\(Self.host)\r\n\r\n")
        let answer = try #require(connection.receiveAnswers(1, within: 10).answers.first)
        #expect(answer.status == 200)
        return try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
    }

    /// The customer's consent at the emulated LWA for the session `info` started (what the companion app
    /// does): the authorization code from the redirect.
    func consent(emulator: String, info: [String: Any]) throws -> String {
        func encoded(_ text: String) -> String {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
        }
        let scopeData =
            #"{"dash:replenish":{"device_model":"\#(info["deviceModel"] as? String ?? "")","#
            + #""serial":"\#(info["serial"] as? String ?? "")","#
            + #""is_test_device":\#(info["isTestDevice"] as? Bool ?? false),"#
            + #""should_include_non_live":\#(info["shouldIncludeNonLive"] as? Bool ?? false)}}"#
        let query = [
            ("client_id", Self.clientId), ("scope", "dash:replenish"), ("scope_data", scopeData),
            ("response_type", "code"), ("redirect_uri", Self.redirectURI),
            ("code_challenge", info["codeChallenge"] as? String ?? ""),
            ("code_challenge_method", info["codeChallengeMethod"] as? String ?? ""), ("state", "s"),
        ].map { "\($0.0)=\(encoded($0.1))" }.joined(separator: "&")
        let redirect = try CurlEasy(options: .init()).perform(
            HTTPRequest(method: .get, url: "\(emulator)/ap/oa?\(query)"))
        let location = try #require(redirect.header("location"), "LWA answered \(redirect.status)")
        let code = URLComponents(string: location)?.queryItems?.first { $0.name == "code" }?.value
        return try #require(code, "LWA's redirect has no code")
    }

    /// companionInfo for the session `info` started, with `code`.
    func companionInfoRequest(info: [String: Any], code: String) -> String {
        let body =
            #"{"sessionId":"\#(info["sessionId"] as? String ?? "")","authCode":"\#(code)","#
            + #""clientId":"\#(Self.clientId)","redirectUri":"\#(Self.redirectURI)"}"#
        return "POST /provision/companionInfo HTTP/1.1\r\n\(Self.host)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
    }

    static let clientId = "amzn1.application-oa2-client.emulator"
    static let redirectURI = "https://companion.example/redirect"

    func led(_ harness: Harness) throws -> String {
        let response = try CurlEasy(options: .init(unixSocketPath: harness.directory + "/state/control.sock")).perform(
            HTTPRequest(method: .get, url: "http://localhost/state"))
        return
            ((try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])?["ledPattern"] as? String)
            ?? ""
    }

    /// The short variant of `scripts/pairing-load.sh`: 200 bad clients for 10 s (slowloris, 5 MB uploads,
    /// garbage, half-open, deviceInfo loops, rebinding) while the good companion pairs.
    @Test func twoHundredBadClientsDoNotStopTheCompanionOrGrowTheAgent() throws {
        let (harness, emulator, port, config, agent) = try startUnpairedAgent()
        let script = Process()
        script.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        script.arguments = [
            "python3", packageRoot() + "/scripts/pairing-load.py", "--port", "\(port)", "--lwa", emulator,
            "--companion", Harness.binDirectory + "/replenish-emulator", "--agent-pid", "\(agent.processIdentifier)",
            "--clients", "200", "--seconds", "10",
        ]
        let output = try Harness.spawning.withLock {
            let output = Pipe()
            script.standardOutput = output
            try script.run()
            return output
        }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        script.waitUntilExit()
        let resultLine = try #require(text.split(separator: "\n").first { $0.hasPrefix("RESULT ") })
        let result = try #require(
            try JSONSerialization.jsonObject(with: Data(resultLine.dropFirst(7).utf8)) as? [String: Any])
        let companion = result["companion"] as? [String: Any] ?? [:]
        let rss = result["rss"] as? [String: Any] ?? [:]
        let clients = result["clients"] as? [String: [String: Int]] ?? [:]
        #expect(companion["paired"] as? Bool == true, "\(text)")
        #expect(rss["flat"] as? Bool == true, "\(text)")
        #expect(script.terminationStatus == 0, "\(text)")
        // Each kind met the port and was answered as it should be, or closed. (Under the flood an uploader
        // whose connection is evicted while it still sends can see a reset; a lone one always gets its 413,
        // see the test above.)
        #expect((clients["oversized"]?["answered 413"] ?? 0) > 0, "\(text)")
        #expect((clients["rebinding"]?["answered 403"] ?? 0) > 0, "\(text)")
        #expect((clients["garbage"]?["answered 400"] ?? 0) > 0, "\(text)")
        #expect((clients["deviceinfo"]?["answered 200"] ?? 0) > 0, "\(text)")
        #expect(clients["slowloris"]?.keys.contains { $0.hasPrefix("closed by server") } == true, "\(text)")
        #expect(agent.isRunning)
        try harness.waitUntil("paired") { try harness.statusJSON(config: config)["paired"] as? Bool == true }
        harness.expectNoSecretsInAgentOutput()
    }
}
