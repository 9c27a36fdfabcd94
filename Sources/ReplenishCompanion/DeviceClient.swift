import Foundation
import NIOCore
import NIOHTTP1

/// The device's two pairing endpoints, over plain HTTP on the local network (`PlainHTTP`).
struct DeviceClient {
    let base: String

    /// Nothing to close afterwards: each request has a connection of its own.
    init(base: String) { self.base = base.hasSuffix("/") ? String(base.dropLast()) : base }

    /// The `deviceInfo` answer, once its proof and serial match the label.
    struct Info {
        var serial: String
        var model: String
        var sessionId: String
        var codeChallenge: String
        var codeChallengeMethod: String
        /// The `scope_data` for LWA: the model and serial, and the phase's flags (in the production phase both
        /// flags are left out, as Amazon's sample devices send it).
        var scopeData: String
    }

    func deviceInfo(label: Label) async throws -> Info {
        var (status, body) = (0, [String: Any]())
        var nonce = ""
        // The device limits deviceInfo per address (429, Retry-After): wait as told, a few times.
        for _ in 0..<5 {
            nonce = Label.randomHex(16)
            let answer = try await send("GET", "/provision/deviceInfo?nonce=\(nonce)")
            (status, body) = (answer.status, answer.json)
            guard status == 429 else { break }
            try await Task.sleep(for: .seconds(min(max(Int(answer.retryAfter ?? "") ?? 1, 1), 30)))
        }
        guard status == 200 else { throw Failure("deviceInfo answered \(status): \(body)") }
        guard let serial = body["serial"] as? String, let model = body["deviceModel"] as? String,
            let isTest = body["isTestDevice"] as? Bool, let nonLive = body["shouldIncludeNonLive"] as? Bool,
            let challenge = body["codeChallenge"] as? String, let method = body["codeChallengeMethod"] as? String,
            let sessionId = body["sessionId"] as? String
        else { throw Failure("deviceInfo's answer lacks a field: \(body)") }
        // Only S256: with `plain` the challenge is the verifier, and whoever passed this answer on could redeem
        // the customer's code. Refused before the proof, whatever the proof says.
        guard method == "S256" else {
            throw Failure(
                "the answer's codeChallengeMethod is \(method), not S256: refused (something between this machine and the device may have changed it)"
            )
        }
        guard serial == label.serial else { throw Failure("the device's serial \(serial) is not the label's") }
        let expected = try label.deviceInfoProof(
            nonce: nonce, sessionId: sessionId, challenge: challenge, method: method, serial: serial, model: model,
            isTestDevice: isTest, shouldIncludeNonLive: nonLive)
        guard body["proof"] as? String == expected else {
            throw Failure(
                "the device did not prove it holds the label's setup key over its answer (or something between changed it): not the device on the label"
            )
        }
        // From here on only proven fields: the proof covers each value below as it was checked.
        var device: [String: Any] = ["device_model": model, "serial": serial]
        if isTest || nonLive {
            device["is_test_device"] = isTest
            device["should_include_non_live"] = nonLive
        }
        let scope = try JSONSerialization.data(withJSONObject: ["dash:replenish": device], options: [.sortedKeys])
        return Info(
            serial: serial, model: model, sessionId: sessionId, codeChallenge: challenge, codeChallengeMethod: method,
            scopeData: String(decoding: scope, as: UTF8.self))
    }

    func companionInfo(sessionId: String, code: String, clientId: String, redirectURI: String, label: Label)
        async throws
    {
        let fields = [
            "sessionId": sessionId, "authCode": code, "clientId": clientId, "redirectUri": redirectURI,
            "proof": try label.companionInfoProof(
                sessionId: sessionId, code: code, clientId: clientId, redirectURI: redirectURI),
        ]
        let answer = try await send(
            "POST", "/provision/companionInfo", body: try JSONSerialization.data(withJSONObject: fields))
        // The device redeems the code at LWA before it answers (up to 30 s per LWA request).
        guard answer.status == 204 else { throw Failure("companionInfo answered \(answer.status): \(answer.json)") }
    }

    private struct Answer {
        var status: Int
        var json: [String: Any]
        var retryAfter: String?
    }

    private func send(_ method: String, _ path: String, body: Data? = nil) async throws -> Answer {
        var headers = [("User-Agent", "replenish-companion")]
        if body != nil { headers.append(("Content-Type", "application/json")) }
        do {
            // The device redeems the code at LWA before it answers companionInfo (up to 30 s per LWA request).
            let answer = try await PlainHTTP.send(
                HTTPMethod(rawValue: method), base + path, headers: headers, body: body.map { Array($0) },
                timeout: .seconds(75))
            let json = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any]
            return Answer(
                status: answer.status, json: json ?? [:], retryAfter: answer.headers.first(name: "retry-after"))
        } catch {
            throw Failure("\(method) \(base)\(path): \(error)")
        }
    }
}
