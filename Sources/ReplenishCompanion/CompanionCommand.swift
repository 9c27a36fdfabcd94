import ArgumentParser
import Foundation

/// `replenish-companion`: pairs a device with a real Amazon account from a laptop, as a phone app would
/// (docs/companion-app.md): it finds the device by DNS-SD (`avahi-browse`) or takes `--device`, checks the
/// device's proof of the setup key on its label (`--setup`), prints (or opens) LWA's authorize URL with the
/// device's challenge, receives the authorization code on a local redirect URI, and posts `companionInfo` with
/// its own proof. It shares no code with the agent or the emulator.
@main
struct CompanionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replenish-companion",
        abstract: "Pair a device in pairing mode with an Amazon account, from a laptop's browser.")

    @Option(help: "The label's payload, RPL1:<serial>:<key> (replenish-agent label prints it).")
    var setup: String?

    @Option(help: "The serial on the label, to type the label in by hand (with --key).")
    var serial: String?

    @Option(
        help: "The setup key as typed from the label: nine groups of four, the last the check group (with --serial).")
    var key: String?

    @Option(help: "The LWA security profile's client id (the device's lwa.clientId).")
    var clientId: String

    @Option(help: "The device's pairing URL, such as http://192.168.1.20:8642 (default: found by DNS-SD).")
    var device: String?

    @Option(help: "LWA's authorize endpoint.")
    var authorizeURL = "https://www.amazon.com/ap/oa"

    @Option(help: "The local port the redirect URI names (it must be registered in the security profile).")
    var redirectPort = 8643

    @Option(help: "The redirect URI registered in the security profile (default http://localhost:PORT/callback).")
    var redirectURI: String?

    @Flag(help: "Open the authorize URL with xdg-open as well as printing it.")
    var open = false

    @Option(help: "Seconds to wait for the customer's consent.")
    var timeout = 300

    func validate() throws {
        guard (setup != nil) != (serial != nil || key != nil), setup != nil || (serial != nil && key != nil) else {
            throw ValidationError("give the label as --setup PAYLOAD (its QR code) or as --serial and --key (typed in)")
        }
    }

    func run() async throws {
        do {
            try await pair()
        } catch let failure as Failure {
            FileHandle.standardError.write(Data("replenish-companion: \(failure.description)\n".utf8))
            throw ExitCode(1)
        }
    }

    private func pair() async throws {
        let label = try setup.map { try Label(payload: $0) } ?? Label(serial: serial ?? "", typedKey: key ?? "")
        let (client, info) = try await provenDevice(label: label)
        say("device \(info.serial) (model \(info.model)) at \(client.base) proved the label's key")

        let listener = try await RedirectListener.start(port: redirectPort)
        let redirect = redirectURI ?? "http://localhost:\(listener.port)/callback"
        let state = Label.randomHex(16)
        let url =
            authorizeURL + "?"
            + Form.encode(
                [
                    ("client_id", clientId), ("scope", "dash:replenish"), ("scope_data", info.scopeData),
                    ("response_type", "code"), ("redirect_uri", redirect), ("code_challenge", info.codeChallenge),
                    ("code_challenge_method", info.codeChallengeMethod), ("state", state),
                ])
        say("sign in and consent at: \(url)")
        if open { _ = try? Process.run(URL(fileURLWithPath: "/usr/bin/xdg-open"), arguments: [url]) }
        let answer = try await listener.waitForRedirect(seconds: timeout)
        guard answer["state"] == state else { throw Failure("the redirect's state is not this request's") }
        if let error = answer["error"] {
            throw Failure("LWA refused: \(error) \(answer["error_description"] ?? "")")
        }
        guard let code = answer["code"], !code.isEmpty else { throw Failure("the redirect carries no code") }
        try await client.companionInfo(
            sessionId: info.sessionId, code: code, clientId: clientId, redirectURI: redirect, label: label)
        say("device \(info.serial) paired")
    }
}

extension CompanionCommand {
    /// The first candidate that proves the label's key: `--device`, or every DNS-SD service that claims the
    /// label's id, in turn (an impostor can claim the id; only the device on the label can prove the key).
    func provenDevice(label: Label) async throws -> (DeviceClient, DeviceClient.Info) {
        let candidates = try device.map { [$0] } ?? Discovery.find(label: label)
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
}

/// A line on standard output, written at once (a pipe or a file would hold a `print` until the process ends,
/// and the authorize URL must be read while the companion waits).
func say(_ text: String) { FileHandle.standardOutput.write(Data("replenish-companion: \(text)\n".utf8)) }

/// Why pairing failed; printed on standard error.
struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `application/x-www-form-urlencoded`.
enum Form {
    static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }

    static func escape(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "" }

    static func decode(_ query: Substring) -> [String: String] {
        var fields: [String: String] = [:]
        for part in query.split(separator: "&") {
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = pieces[0].replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            let value =
                pieces.count > 1 ? pieces[1].replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" : ""
            if fields[name] == nil { fields[name] = value }
        }
        return fields
    }
}
