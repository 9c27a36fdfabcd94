import Foundation

/// Pairing as a phone app does it (docs/companion-app.md): the device proves the label's key, the customer
/// consents at LWA in the laptop's browser, the code comes back on the local redirect URI, and `companionInfo`
/// hands it to the device under the companion's proof.
struct Pairing {
    var clientId: String
    /// The device's pairing URL, or nil to find it by DNS-SD.
    var device: String?
    var redirect: RedirectOptions
    /// Whether to open the authorize URL with xdg-open as well as printing it.
    var openBrowser: Bool
    /// Seconds to wait for the customer's consent.
    var timeout: Int
    /// Seconds to keep looking by DNS-SD while no service claims the label's id (a device that just joined a
    /// network, and a laptop that just came back to it, take a while to be seen); 0 looks once.
    var discoveryWait = 0

    func run(label: Label) async throws {
        let (client, info) = try await provenDevice(label: label)
        say("device \(info.serial) (model \(info.model)) at \(client.base) proved the label's key")

        let listener = try await RedirectListener.start(port: redirect.redirectPort)
        let redirectURI = redirect.redirectURI ?? "http://localhost:\(listener.port)/callback"
        let state = Label.randomHex(16)
        let url =
            redirect.authorizeURL + "?"
            + Form.encode(
                [
                    ("client_id", clientId), ("scope", "dash:replenish"), ("scope_data", info.scopeData),
                    ("response_type", "code"), ("redirect_uri", redirectURI), ("code_challenge", info.codeChallenge),
                    ("code_challenge_method", info.codeChallengeMethod), ("state", state),
                ])
        say("sign in and consent at: \(url)")
        if openBrowser { _ = try? Process.run(URL(fileURLWithPath: "/usr/bin/xdg-open"), arguments: [url]) }
        let answer = try await listener.waitForRedirect(seconds: timeout)
        guard answer["state"] == state else { throw Failure("the redirect's state is not this request's") }
        if let error = answer["error"] {
            throw Failure("LWA refused: \(error) \(answer["error_description"] ?? "")")
        }
        guard let code = answer["code"], !code.isEmpty else { throw Failure("the redirect carries no code") }
        try await client.companionInfo(
            sessionId: info.sessionId, code: code, clientId: clientId, redirectURI: redirectURI, label: label)
        say("device \(info.serial) paired")
    }

    /// The first candidate that proves the label's key: `device`, or every DNS-SD service that claims the
    /// label's id, in turn (an impostor can claim the id; only the device on the label can prove the key).
    func provenDevice(label: Label) async throws -> (DeviceClient, DeviceClient.Info) {
        let candidates: [String]
        if let device { candidates = [device] } else { candidates = try await discovered(label: label) }
        if candidates.count > 1 {
            say(
                "\(candidates.count) services claim this label's id (\(candidates.joined(separator: ", "))): trying each until one proves the label's key"
            )
        }
        var refusals: [String] = []
        for base in candidates {
            let client = DeviceClient(base: base)
            do {
                return (client, try await client.deviceInfo(label: label))
            } catch let failure as Failure {
                guard candidates.count > 1 else { throw failure }
                say("\(base): \(failure.description)")
                refusals.append(base)
            }
        }
        throw Failure(
            "none of the \(candidates.count) services that claim this label's id proved the label's key (\(refusals.joined(separator: ", "))): not the device on the label"
        )
    }

    /// `Discovery.find`, again every 3 s for up to `discoveryWait` seconds while it finds nothing.
    private func discovered(label: Label) async throws -> [String] {
        let deadline = ContinuousClock.now + .seconds(discoveryWait)
        while true {
            do {
                return try Discovery.find(label: label)
            } catch let failure as Failure {
                guard ContinuousClock.now + .seconds(3) < deadline else { throw failure }
                try await Task.sleep(for: .seconds(3))
            }
        }
    }
}
