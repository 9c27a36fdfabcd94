import Foundation
import Testing

@testable import ReplenishAgent

/// The setup key and the two pairing proofs (`SetupKey`, `LabelPayload`), the key file's rules in the config
/// (`pairing.setupKeyFile`), and docs/companion-app.md's test vector, read from the page itself.
@Suite(.tags(.unit)) struct SetupKeyTests {
    /// The `name: value` lines of the fenced block after "**Test vector**" in docs/companion-app.md.
    static func documentedVector() throws -> [String: String] { try documentedBlock(in: "docs/companion-app.md") }

    /// The fields of the text block after "**Test vector**" in the page `path` (relative to the package).
    static func documentedBlock(in path: String) throws -> [String: String] {
        let text = try String(contentsOfFile: packageRoot() + "/" + path, encoding: .utf8)
        guard let heading = text.range(of: "**Test vector**"),
            let open = text.range(of: "```text\n", range: heading.upperBound..<text.endIndex),
            let close = text.range(of: "```", range: open.upperBound..<text.endIndex)
        else { return [:] }
        var fields: [String: String] = [:]
        for line in text[open.upperBound..<close.lowerBound].split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[String(line[..<colon])] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return fields
    }

    @Test func theDocumentedTestVectorIsWhatTheDeviceComputes() throws {
        let vector = try Self.documentedVector()
        func field(_ name: String) -> String { vector[name] ?? "(missing \(name))" }
        #expect(vector.count == 15, "the test vector block of docs/companion-app.md")
        let key = try #require(SetupKey(hex: field("key")))
        func deviceInfo(method: String, isTestDevice: Bool, shouldIncludeNonLive: Bool) -> String {
            SetupKey.deviceInfoMessage(
                nonce: field("nonce"), sessionId: field("sessionId"), codeChallenge: field("codeChallenge"),
                codeChallengeMethod: method, serial: field("serial"), deviceModel: field("deviceModel"),
                isTestDevice: isTestDevice, shouldIncludeNonLive: shouldIncludeNonLive)
        }
        #expect(field("isTestDevice") == "true" && field("shouldIncludeNonLive") == "true")
        let proven = deviceInfo(method: field("codeChallengeMethod"), isTestDevice: true, shouldIncludeNonLive: true)
        #expect(key.proof(of: proven) == field("deviceInfo proof"))
        #expect(key.accepts(field("deviceInfo proof"), of: proven))
        // Version 2 covers the method and both phase flags: a relay that changes any of them breaks the proof.
        for relayed in [
            deviceInfo(method: "plain", isTestDevice: true, shouldIncludeNonLive: true),
            deviceInfo(method: field("codeChallengeMethod"), isTestDevice: false, shouldIncludeNonLive: true),
            deviceInfo(method: field("codeChallengeMethod"), isTestDevice: true, shouldIncludeNonLive: false),
        ] {
            #expect(!key.accepts(field("deviceInfo proof"), of: relayed))
        }
        #expect(
            key.proof(of: deviceInfo(method: "plain", isTestDevice: true, shouldIncludeNonLive: true))
                == "31def6da319be9544fdec13376d1da8a865780217058831d898352ca2497a184")
        let companionInfo = SetupKey.companionInfoMessage(
            sessionId: field("sessionId"), authCode: field("authCode"), clientId: field("clientId"),
            redirectUri: field("redirectUri"))
        // The manual form: the key's eight groups and the check group over the serial and the key.
        let label = LabelPayload(serial: field("serial"), key: key)
        #expect(label.manualEntryKey == field("manual key"))
        #expect(LabelPayload.manualEntry(serial: field("serial"), key: field("manual key")) == .success(label))
        #expect(key.proof(of: companionInfo) == field("companionInfo proof"))
        #expect(key.accepts(field("companionInfo proof"), of: companionInfo))
    }

    @Test func aProofIsAcceptedOnlyExactly() throws {
        let key = try #require(SetupKey(hex: "000102030405060708090a0b0c0d0e0f"))
        let proof = key.proof(of: "m")
        #expect(key.accepts(proof, of: "m"))
        #expect(!key.accepts(proof, of: "n"))
        #expect(!key.accepts(proof.uppercased(), of: "m"))
        #expect(!key.accepts(String(proof.dropLast()), of: "m"))
        #expect(!key.accepts(proof + "0", of: "m"))
        #expect(!key.accepts("", of: "m"))
        var flipped = Array(proof)
        flipped[63] = flipped[63] == "0" ? "1" : "0"
        #expect(!key.accepts(String(flipped), of: "m"))
        #expect(HMACSHA256.equalInConstantTime([1, 2], [1, 2]) && !HMACSHA256.equalInConstantTime([1, 2], [1, 3]))
    }

    @Test func theKeyFileHoldsThirtyTwoLowercaseHexDigitsAndAtMostANewline() {
        let hex = "000102030405060708090a0b0c0d0e0f"
        #expect(SetupKey(fileContents: Array(hex.utf8))?.hex == hex)
        #expect(SetupKey(fileContents: Array((hex + "\n").utf8))?.hex == hex)
        for bad in [hex + "\n\n", hex.uppercased(), String(hex.dropLast()), hex + "0", " " + hex, "", hex + " "] {
            #expect(SetupKey(fileContents: Array(bad.utf8)) == nil, "\(bad.debugDescription)")
        }
    }

    @Test func theKeyNeverPrints() throws {
        let key = try #require(SetupKey(hex: "000102030405060708090a0b0c0d0e0f"))
        let shown =
            "\(key) \(String(describing: key)) \(String(reflecting: key)) \(Mirror(reflecting: key).children.count)"
        #expect(!shown.contains("0001"))
        #expect(shown.contains("<redacted>"))
    }

    @Test func noncesAreThirtyTwoHexDigits() {
        #expect(SetupKey.isNonce("00112233445566778899aabbccddeeff"))
        #expect(SetupKey.isNonce("00112233445566778899AABBCCDDEEFF"))
        for bad in [
            "", "0011", "00112233445566778899aabbccddeef", "00112233445566778899aabbccddeeff0",
            "0011223344556677889\u{10}aabbccddeeff", "00112233445566778899aabbccddeefg",
        ] {
            #expect(!SetupKey.isNonce(bad), "\(bad.debugDescription)")
        }
        #expect(PairingCoordinator<ContinuousClock>.nonce(inQuery: "a=1&nonce=abc&nonce=d") == "abc")
        #expect(PairingCoordinator<ContinuousClock>.nonce(inQuery: "xnonce=1") == nil)
        #expect(PairingCoordinator<ContinuousClock>.nonce(inQuery: nil) == nil)
    }

    @Test func theLabelPayloadRoundTrips() throws {
        let key = try #require(SetupKey(hex: "000102030405060708090a0b0c0d0e0f"))
        let payload = LabelPayload(serial: "SN0001", key: key)
        #expect(payload.text == "RPL1:SN0001:000102030405060708090a0b0c0d0e0f")
        #expect(payload.manualEntryKey == "0001-0203-0405-0607-0809-0a0b-0c0d-0e0f-a6d4")
        #expect(LabelPayload(text: payload.text) == payload)
        // Typed in by hand: any case, dashes or spaces or none.
        for typed in [
            "0001-0203-0405-0607-0809-0A0B-0C0D-0E0F-A6D4", "000102030405060708090a0b0c0d0e0fa6d4",
            "0001 0203 0405 0607 0809 0a0b 0c0d 0e0f a6d4",
        ] {
            #expect(LabelPayload.manualEntry(serial: "SN0001", key: typed) == .success(payload), "\(typed)")
        }
        // One digit of the key, of the check group or of the serial mistyped: caught by the check group.
        let hex = Array("0123456789abcdef")
        for position in 0..<36 {
            for shift in 1..<16 {
                var digits = Array("000102030405060708090a0b0c0d0e0fa6d4")
                digits[position] = hex[(hex.firstIndex(of: digits[position])! + shift) % 16]
                #expect(
                    LabelPayload.manualEntry(serial: "SN0001", key: String(digits)) == .failure(.mistyped),
                    "\(position) \(shift)")
            }
        }
        #expect(
            LabelPayload.manualEntry(serial: "SN0002", key: "000102030405060708090a0b0c0d0e0fa6d4")
                == .failure(.mistyped))
        for malformed in [
            "000102030405060708090a0b0c0d0e0f", "000102030405060708090a0b0c0d0e0fa6d",
            "zz"
                + String(
                    repeating: "0", count: 34),
        ] {
            #expect(LabelPayload.manualEntry(serial: "SN0001", key: malformed) == .failure(.malformed), "\(malformed)")
        }
        #expect(
            LabelPayload.manualEntry(serial: "SN-1", key: "000102030405060708090a0b0c0d0e0fa6d4")
                == .failure(.malformed))
        for bad in [
            "RPL2:SN0001:000102030405060708090a0b0c0d0e0f", "RPL1:SN-1:000102030405060708090a0b0c0d0e0f",
            "RPL1:SN0001:0001", "RPL1:SN0001", "RPL1:SN0001:000102030405060708090a0b0c0d0e0f:x",
        ] {
            #expect(LabelPayload(text: bad) == nil, "\(bad)")
        }
    }

    /// A key file with `contents` and `mode` in a fresh directory; its path.
    static func keyFile(_ contents: String, mode: mode_t = 0o600) throws -> String {
        let path = temporaryDirectory() + "/setup-key"
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, mode)
        return path
    }

    @Test func theConfigReadsTheKeyFileAndChecksItsModeAndContents() throws {
        let tests = ConfigTests()
        var config = ConfigTests.validConfig()
        let good = try Self.keyFile("000102030405060708090a0b0c0d0e0f\n")
        config["pairing"] = ["listen": "0.0.0.0:8642", "setupKeyFile": good]
        let (loaded, problems) = try tests.load(config)
        #expect(problems == [])
        #expect(loaded?.pairingSetupKey?.hex == "000102030405060708090a0b0c0d0e0f")

        for (contents, mode, expected) in [
            ("000102030405060708090a0b0c0d0e0f\n", mode_t(0o640), "group or others may access it (mode 640)"),
            ("000102030405060708090a0b0c0d0e0f\n", mode_t(0o604), "group or others may access it (mode 604)"),
            ("not a key\n", mode_t(0o600), "does not hold a setup key"),
        ] {
            config["pairing"] = ["listen": "0.0.0.0:8642", "setupKeyFile": try Self.keyFile(contents, mode: mode)]
            let (_, problems) = try tests.load(config)
            #expect(problems.count == 1, "\(problems)")
            #expect(problems.first?.hasPrefix("pairing.setupKeyFile: ") == true, "\(problems)")
            #expect(problems.first?.contains(expected) == true, "\(problems)")
            #expect(problems.first?.contains("0001020304") == false)
        }
        config["pairing"] = ["listen": "0.0.0.0:8642", "setupKeyFile": "/nonexistent/setup-key"]
        let (_, missing) = try tests.load(config)
        #expect(missing.first?.hasPrefix("pairing.setupKeyFile: no such file /nonexistent/setup-key") == true)
    }

    @Test func productionNeedsASetupKeyInCompanionModeOnly() throws {
        let tests = ConfigTests()
        for phase in ["test", "certification", "production"] {
            var config = ConfigTests.validConfig()
            config["device"] = ["serial": "SN0001", "model": "5f4f1c5e-1234", "phase": phase]
            let (_, problems) = try tests.load(config)
            #expect(
                problems
                    == (phase == "production"
                        ? ["pairing.setupKeyFile: \(AgentConfig.setupKeyRequiredInProduction)"] : []),
                "\(phase)")
            config["pairing"] = ["mode": "code"]
            config["lwa"] = [
                "clientId": "amzn1.application-oa2-client.x", "tokenURL": "https://api.amazon.com/auth/o2/token",
                "codePairURL": "https://api.amazon.com/auth/O2/create/codepair",
            ]
            let (_, codeMode) = try tests.load(config)
            #expect(codeMode == [], "\(phase), code mode")
        }
    }
}

/// The DNS-SD advertisement's records (`PairingAdvertisement`): TXT `v`, `id` (SHA-256 of the serial, its first
/// 16 hex digits, here as `sha256sum` computes them) and `md`.
@Suite(.tags(.unit)) struct PairingAdvertisementTests {
    @Test func theRecordsNameTheVersionTheSerialsHashAndTheModel() {
        let advertisement = PairingAdvertisement(serial: "SN0001", model: "model-1", port: 8642)
        #expect(advertisement.txt == ["v=2", "id=91cb49fdbb972afc", "md=model-1"])
        #expect(advertisement.name == "Replenish 91cb49fdbb972afc")
        #expect(advertisement.port == 8642)
        #expect(PairingAdvertisement.serviceType == "_replenish._tcp")
        #expect(PairingAdvertisement.id(serial: "TEST0001") == "07ba71d69de78749")
    }
}
