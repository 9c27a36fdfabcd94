import Foundation
import NIOCore
import NIOHTTP1

/// The device's three provisioning endpoints on its setup access point (docs/wifi-setup.md, "The provisioning
/// requests and their proofs"): every request carries the label's proof, and every answer's proof is checked
/// before the companion acts on a field of it (a relay on the access point's network cannot change the list, the
/// session or the state the customer is shown).
struct SetupClient {
    let base: String
    let label: Label

    init(base: String, label: Label) {
        self.base = base.hasSuffix("/") ? String(base.dropLast()) : base
        self.label = label
    }

    /// A network the device sees, as its proven answer lists it.
    struct Network: Decodable {
        var ssid: String
        /// NetworkManager's strength, 0-100.
        var signal: Int
        /// `open`, `wpa` or `unsupported`.
        var security: String
    }

    /// `GET /provision/networks`: a new session and the networks the device sees, once the answer's proof holds.
    func networks() async throws -> (sessionId: String, networks: [Network]) {
        struct Answer: Decodable {
            var sessionId: String
            var networks: [Network]
            var proof: String
        }
        let nonce = Label.randomHex(16)
        let proof = try label.hmac("replenish-wifi-v1 networks request\n\(nonce)")
        // The device scans before it answers.
        let answer: Answer = try await call(
            "GET", "/provision/networks", query: "nonce=\(nonce)&proof=\(proof)", timeout: 45, expecting: 200)
        let lines = answer.networks.map { "\(Self.hex($0.ssid)) \($0.signal) \($0.security)" }
        let expected = try label.hmac(
            (["replenish-wifi-v1 networks", nonce, answer.sessionId] + lines).joined(separator: "\n"))
        guard answer.proof == expected else { throw Self.unproven("list of networks") }
        return (answer.sessionId, answer.networks)
    }

    /// `POST /provision/network`: the device is to join `ssid` (`passphrase` nil for an open network).
    func join(sessionId: String, ssid: String, passphrase: String?, hidden: Bool) async throws {
        struct Request: Encodable {
            var sessionId: String
            var ssid: String
            /// Left out of the JSON for an open network.
            var passphrase: String?
            var hidden: Bool
            var proof: String
        }
        let proof = try label.hmac(
            "replenish-wifi-v1 network\n\(sessionId)\n\(Self.hex(ssid))\n\(passphrase ?? "")\n"
                + "\(passphrase == nil ? "open" : "wpa")\n\(hidden)")
        let body = try JSONEncoder().encode(
            Request(sessionId: sessionId, ssid: ssid, passphrase: passphrase, hidden: hidden, proof: proof))
        struct Accepted: Decodable { var state: String }
        let _: Accepted = try await call(
            "POST", "/provision/network", body: Array(body), timeout: 15, expecting: 202)
    }

    /// `GET /provision/network`: the join's state (`idle`, `joining`, `joined` or `failed:<reason>`) and its
    /// network, once the answer's proof holds.
    func state(sessionId: String) async throws -> (state: String, ssid: String) {
        struct Answer: Decodable {
            var state: String
            var ssid: String
            var proof: String
        }
        let nonce = Label.randomHex(16)
        let proof = try label.hmac("replenish-wifi-v1 state request\n\(sessionId)\n\(nonce)")
        let query = "sessionId=\(Form.escape(sessionId))&nonce=\(nonce)&proof=\(proof)"
        let answer: Answer = try await call(
            "GET", "/provision/network", query: query, timeout: 5, expecting: 200)
        let expected = try label.hmac(
            "replenish-wifi-v1 state\n\(sessionId)\n\(nonce)\n\(answer.state)\n\(Self.hex(answer.ssid))")
        guard answer.proof == expected else { throw Self.unproven("join state") }
        return (answer.state, answer.ssid)
    }

    /// No answer from the device at all (as opposed to an answer it gave): worth asking again while it joins.
    struct NoAnswer: Error, CustomStringConvertible {
        var description: String
    }

    /// An SSID in a proof's text: the lowercase hex of its UTF-8.
    static func hex(_ ssid: String) -> String { Label.hex(Array(ssid.utf8)[...]) }

    private static func unproven(_ what: String) -> Failure {
        Failure(
            "the device's \(what) does not carry the label's proof (not the device on the label, "
                + "or something on the setup network changed it): refused"
        )
    }

    /// The device's refusals: `{"error": code, "message": text}`.
    private struct Problem: Decodable {
        var error: String?
        var message: String?
    }

    /// One request and its JSON answer, which must have `status`; a 429 is waited out as its Retry-After says (at
    /// most 30 s, a few times).
    private func call<T: Decodable>(
        _ method: String, _ path: String, query: String? = nil, body: [UInt8]? = nil, timeout: Int,
        expecting status: Int
    ) async throws -> T {
        var headers = [("User-Agent", "replenish-companion")]
        if body != nil { headers.append(("Content-Type", "application/json")) }
        let url = base + path + (query.map { "?" + $0 } ?? "")
        for _ in 0..<5 {
            let answer: PlainHTTP.Answer
            do {
                answer = try await PlainHTTP.send(
                    HTTPMethod(rawValue: method), url, headers: headers, body: body, timeout: .seconds(Int64(timeout)))
            } catch {
                // PlainHTTP's own failures name the request already.
                throw NoAnswer(description: (error as? Failure)?.description ?? "\(method) \(base)\(path): \(error)")
            }
            if answer.status == 429 {
                try await Task.sleep(
                    for: .seconds(min(max(Int(answer.headers.first(name: "retry-after") ?? "") ?? 1, 1), 30)))
                continue
            }
            guard answer.status == status else {
                let problem = try? JSONDecoder().decode(Problem.self, from: Data(answer.body))
                let reason = [problem?.error, problem?.message].compactMap { $0 }.joined(separator: ": ")
                throw Failure("\(method) \(path) answered \(answer.status)\(reason.isEmpty ? "" : " " + reason)")
            }
            do { return try JSONDecoder().decode(T.self, from: Data(answer.body)) } catch {
                throw Failure("\(method) \(path) answered \(status) without the fields it must carry")
            }
        }
        throw Failure("\(method) \(path): the device kept answering 429 (too many requests)")
    }
}
