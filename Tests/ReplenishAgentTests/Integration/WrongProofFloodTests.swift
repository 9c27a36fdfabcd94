import Foundation
import Synchronization
import Testing

@testable import ReplenishAgent

/// A flood of wrong `companionInfo` proofs against the real agent (issue 50, item 7): answered `429` with
/// `Retry-After` once an address has used up its wrong proofs, logged as a few counts rather than a line per
/// request, the agent's memory back within 2 MB of where it was, and the phone at another address still pairs.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct WrongProofFloodTests {
    /// The kB after `field` (`VmRSS`, `VmHWM`) in /proc/PID/status.
    static func kilobytes(_ field: String, of pid: Int32) -> Int? {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = text.split(separator: "\n").first { $0.hasPrefix(field + ":") }
        return line.flatMap { Int($0.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") }
    }

    /// A session started from `source`: its id.
    static func session(port: Int, source: String) throws -> String {
        let connection = try RawConnection(port: port, source: source)
        connection.send(
            "GET /provision/deviceInfo?nonce=00112233445566778899aabbccddeeff HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let answer = try #require(connection.receiveAnswers(1, within: 10).answers.first)
        let body = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any]
        return try #require(body?["sessionId"] as? String, "\(answer.status) \(answer.body)")
    }

    struct Flood: Sendable {
        var statuses: [Int: Int] = [:]
        var retryAfters: Set<String> = []
        /// How long the flood took, in seconds (the longest of the attackers').
        var seconds = 0.0
    }

    /// Sends wrong proofs for `session` from `source` on one keep-alive connection, 50 pipelined at a time,
    /// until `answers` are answered (at most `timeout` seconds: a flood is a number of requests, whatever the
    /// machine's load makes of its time); counts the answers by status.
    static func flood(port: Int, source: String, session: String, answers: Int, timeout: Double = 60) throws -> Flood {
        let body = """
            {"sessionId":"\(session)","authCode":"ANdNAVhyhqirUelHGEHA",\
            "clientId":"amzn1.application-oa2-client.emulator","redirectUri":"https://companion.example/redirect",\
            "proof":"\(String(repeating: "0", count: 64))"}
            """
        let request =
            "POST /provision/companionInfo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
        let batch = String(repeating: request, count: 50)
        let connection = try RawConnection(port: port, source: source)
        var statuses: [Int: Int] = [:]
        var retryAfters: Set<String> = []
        let begin = Date()
        let end = begin.addingTimeInterval(timeout)
        var total = 0
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        /// Takes the whole answers at the start of `pending` (each framed by its Content-Length); how many.
        func takeAnswers() -> Int {
            var start = 0
            var taken = 0
            while let headEnd = (start..<max(start, pending.count - 3)).first(where: {
                pending[$0] == 13 && pending[$0 + 1] == 10 && pending[$0 + 2] == 13 && pending[$0 + 3] == 10
            }) {
                let head = String(decoding: pending[start..<headEnd], as: UTF8.self).lowercased()
                let length =
                    head.components(separatedBy: "content-length: ").dropFirst().first
                    .flatMap { Int($0.prefix { $0.isNumber }) } ?? 0
                guard pending.count >= headEnd + 4 + length else { break }
                let status = Int(head.dropFirst(9).prefix(3)) ?? 0
                statuses[status, default: 0] += 1
                if status == 429 {
                    retryAfters.insert(
                        head.components(separatedBy: "retry-after: ").dropFirst().first.map {
                            String($0.prefix { $0 != "\r" })
                        } ?? "none")
                }
                start = headEnd + 4 + length
                taken += 1
            }
            pending.removeFirst(start)
            return taken
        }
        sending: while total < answers && Date() < end {
            guard connection.sendAll(Array(batch.utf8)) else { break }
            var answered = 0
            defer { total += answered }
            while answered < 50 {
                var descriptor = pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 10_000) > 0 else { break sending }
                let count = read(connection.fd, &buffer, buffer.count)
                guard count > 0 else { break sending }
                pending += buffer[0..<count]
                answered += takeAnswers()
            }
        }
        return Flood(statuses: statuses, retryAfters: retryAfters, seconds: Date().timeIntervalSince(begin))
    }

    @Test func aFloodOfWrongProofsIsThrottledLoggedAsCountsAndLeavesNoMemoryBehind() throws {
        let harness = Harness()
        let (emulator, port, config, agent) = try harness.startUnpairedAgent()
        let pid = agent.processIdentifier

        // Warm up every path the flood takes (a session, a wrong proof), then take the agent's RSS.
        let sources = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
        let sessions = try sources.map { try Self.session(port: port, source: $0) }
        _ = try Self.flood(
            port: port, source: "127.0.0.6", session: Self.session(port: port, source: "127.0.0.6"),
            answers: 50)
        let before = try #require(Self.kilobytes("VmRSS", of: pid))

        // Four attackers, each on its own address, each flooding its own session with 400 wrong proofs.
        let results = Mutex(Flood())
        DispatchQueue.concurrentPerform(iterations: sources.count) { index in
            let flood = try? Self.flood(port: port, source: sources[index], session: sessions[index], answers: 400)
            results.withLock { all in
                all.statuses.merge(flood?.statuses ?? [:], uniquingKeysWith: +)
                all.retryAfters.formUnion(flood?.retryAfters ?? [])
                all.seconds = max(all.seconds, flood?.seconds ?? 0)
            }
        }
        let statuses = results.withLock { $0.statuses }
        let retryAfters = results.withLock { $0.retryAfters }
        let seconds = results.withLock { $0.seconds }
        let after = try #require(Self.kilobytes("VmRSS", of: pid))
        let peak = Self.kilobytes("VmHWM", of: pid) ?? 0
        let answered = statuses.values.reduce(0, +)
        print(
            "wrong-proof flood: \(answered) answers in \(seconds) s \(statuses); RSS \(before) kB before, "
                + "\(after) kB after, peak \(peak) kB")
        #expect(answered >= 1600, "the whole flood reached the agent: \(statuses)")

        // At most each address's burst (10) and one every 2 s beyond are checked; the rest are 429.
        #expect((statuses[403] ?? 0) <= sources.count * (10 + Int(seconds / 2) + 2), "\(statuses) in \(seconds) s")
        #expect((statuses[429] ?? 0) > 0, "\(statuses)")
        #expect(retryAfters.isSubset(of: ["1", "2"]), "\(retryAfters)")
        // A handful of count lines, not one per request.
        let lines = harness.agentLogs.split(separator: "\n").filter { $0.contains("pairing refused") }
        #expect(lines.count <= 4, "\(lines.count) lines: \(lines.prefix(3))")
        #expect(lines.contains { $0.contains("pairing.wrongProofs=") })
        // The memory the flood took is given back (issue 50: from 24 to 190 MB, kept).
        #expect(after - before <= 2048, "RSS \(before) kB before the flood, \(after) kB after (peak \(peak) kB)")

        // The phone, at its own address, pairs with the right proof at once.
        try harness.pair(emulator: emulator, pairingPort: port)
        try harness.waitUntil("paired") { try harness.statusJSON(config: config)["paired"] as? Bool == true }
        #expect(agent.isRunning)
        harness.expectNoSecretsInAgentOutput()
    }
}
