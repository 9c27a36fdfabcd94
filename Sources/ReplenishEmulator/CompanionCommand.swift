import ArgumentParser
import Foundation

/// `replenish-emulator companion`: plays the companion phone app. It reads the device's pairing info, asks the
/// emulated LWA for a code (the customer's consent), and hands code, client id and redirect URI to the device.
struct CompanionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "companion", abstract: "Pair a device in pairing mode with the emulated LWA.")

    @Option(help: "The device's pairing base URL, such as http://127.0.0.1:8642.")
    var device: String

    @Option(help: "The emulated LWA base URL (serving /ap/oa).")
    var lwa: String

    @Option(help: "Redirect URI registered for the companion app.")
    var redirectURI = "https://companion.example/redirect"

    @Option(help: "LWA client id of the app.")
    var clientId = "amzn1.application-oa2-client.emulator"

    @Option(
        help: ArgumentHelp(
            "The label's payload, RPL1:<serial>:<key>: check the device's proof and send the companion's.",
            valueName: "PAYLOAD"))
    var setup: String?

    func run() throws {
        do {
            try pair()
        } catch let failure as NoAnswer {
            Self.fail(failure.description)
        } catch let failure as CompanionFailure {
            Self.fail(failure.description)
        } catch {
            Self.fail("\(error)")
        }
    }

    /// Why pairing failed; printed on standard error.
    struct CompanionFailure: Error, CustomStringConvertible {
        var description: String
    }

    /// A request that got no answer (no connection, a timeout, the connection closed or the exchange failed):
    /// the one kind of failure a request to the device is sent again for.
    struct NoAnswer: Error, CustomStringConvertible {
        var description: String
    }

    private static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("companion: \(message)\n".utf8))
        Foundation.exit(1)
    }

    private func pair() throws {
        func send(_ method: String, _ url: String, headers: [(String, String)] = [], body: [UInt8]? = nil)
            throws -> CompanionHTTP.Answer
        {
            try CompanionHTTP.send(method, url, headers: headers, body: body)
        }
        let deviceBase = device.hasSuffix("/") ? String(device.dropLast()) : device
        let lwaBase = lwa.hasSuffix("/") ? String(lwa.dropLast()) : lwa

        // A device on a busy network may drop a connection before reading it (it makes room for new ones
        // under load): a request to the device that got no answer is sent again, a few times, as an app
        // would. A dropped request was never read, so sending it again cannot pair twice.
        func toDevice(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil)
            throws -> CompanionHTTP.Answer
        {
            var attempt = 1
            while true {
                do {
                    return try send(method, deviceBase + path, headers: headers, body: body)
                } catch let failure as NoAnswer where attempt < 4 {
                    FileHandle.standardError.write(Data("companion: \(path): \(failure); trying again\n".utf8))
                    attempt += 1
                    Thread.sleep(forTimeInterval: 0.5)
                }
            }
        }
        // With the label's payload: a fresh nonce for each deviceInfo, whose proof the device must answer.
        let label = try setup.map { payload in
            do { return try PairingProof(payload: payload) } catch { throw CompanionFailure(description: "\(error)") }
        }
        var nonce = PairingProof.makeNonce()
        func infoPath() -> String { label == nil ? "/provision/deviceInfo" : "/provision/deviceInfo?nonce=\(nonce)" }
        // A device rate-limits deviceInfo per address (429 with Retry-After): wait as told, a few times.
        var infoAnswer = try toDevice("GET", infoPath())
        var asked = 1
        while infoAnswer.status == 429 && asked <= 5 {
            let wait = min(max(Int(infoAnswer.header("retry-after") ?? "") ?? 1, 1), 30)
            Thread.sleep(forTimeInterval: Double(wait))
            nonce = PairingProof.makeNonce()
            infoAnswer = try toDevice("GET", infoPath())
            asked += 1
        }
        guard infoAnswer.status == 200 else {
            throw CompanionFailure(
                description: "deviceInfo answered \(infoAnswer.status): \(infoAnswer.bodyText)")
        }
        guard let info = try? JSONValue.parse(infoAnswer.body),
            let serial = info["serial"]?.stringValue, let model = info["deviceModel"]?.stringValue,
            let isTest = info["isTestDevice"]?.boolValue, let nonLive = info["shouldIncludeNonLive"]?.boolValue,
            let challenge = info["codeChallenge"]?.stringValue, let method = info["codeChallengeMethod"]?.stringValue,
            let sessionId = info["sessionId"]?.stringValue
        else {
            throw CompanionFailure(description: "deviceInfo answer lacks a field: \(infoAnswer.bodyText)")
        }
        // Only S256, with a label or without: with `plain` the challenge is the verifier itself.
        guard method == "S256" else {
            throw CompanionFailure(
                description: "deviceInfo's codeChallengeMethod is \(method), not S256: refused before any consent")
        }
        if let label {
            // The device on the label: its serial, and a proof only the key's holder can make for this nonce, over
            // every field used below.
            guard serial == label.serial else {
                throw CompanionFailure(description: "the device's serial \(serial) is not the label's \(label.serial)")
            }
            let expected = try label.deviceInfoProof(
                nonce: nonce, sessionId: sessionId, codeChallenge: challenge, codeChallengeMethod: method,
                serial: serial, model: model, isTestDevice: isTest, shouldIncludeNonLive: nonLive)
            guard let proof = info["proof"]?.stringValue, proof == expected else {
                throw CompanionFailure(
                    description: "the device did not prove it holds the label's setup key: not the device on the label")
            }
        }

        let scopeData: JSONValue = .obj([
            "dash:replenish": .obj([
                "device_model": .string(model), "serial": .string(serial), "is_test_device": .bool(isTest),
                "should_include_non_live": .bool(nonLive),
            ])
        ])
        let state = "xyz"
        let query = FormEncoding.encode([
            ("client_id", clientId), ("scope", "dash:replenish"), ("scope_data", scopeData.serialized),
            ("response_type", "code"), ("redirect_uri", redirectURI), ("code_challenge", challenge),
            ("code_challenge_method", "S256"), ("state", state),
        ])
        let consent = try send("GET", lwaBase + "/ap/oa?" + query)
        guard (300...399).contains(consent.status), let location = consent.header("location") else {
            throw CompanionFailure(description: "LWA /ap/oa answered \(consent.status): \(consent.bodyText)")
        }
        let locationQuery = location.firstIndex(of: "?").map { String(location[location.index(after: $0)...]) } ?? ""
        let params = FormEncoding.decode(locationQuery) ?? []
        func param(_ name: String) -> String? { params.first { $0.name == name }?.value }
        if let error = param("error") {
            throw CompanionFailure(description: "LWA refused consent: \(error)")
        }
        guard let code = param("code"), !code.isEmpty else {
            throw CompanionFailure(description: "LWA redirect has no code")
        }
        guard param("state") == state else { throw CompanionFailure(description: "LWA redirect lost the state") }

        var companionFields: [String: JSONValue] = [
            "sessionId": .string(sessionId), "authCode": .string(code), "clientId": .string(clientId),
            "redirectUri": .string(redirectURI),
        ]
        if let label {
            companionFields["proof"] = .string(
                try label.companionInfoProof(
                    sessionId: sessionId, authCode: code, clientId: clientId, redirectUri: redirectURI))
        }
        let companionInfo: JSONValue = .sortedObject(companionFields)
        let answer = try toDevice(
            "POST", "/provision/companionInfo", headers: [("Content-Type", "application/json")],
            body: Array(companionInfo.serialized.utf8))
        guard answer.status == 204 else {
            throw CompanionFailure(description: "companionInfo answered \(answer.status): \(answer.bodyText)")
        }
        print("companion: device \(serial) (model \(model)) paired")
    }
}
