import ArgumentParser
import Foundation

/// `replenish-companion`: pairs a device with a real Amazon account from a laptop, as a phone app would
/// (docs/companion-app.md; `pair`, the default subcommand), or first hands a device in setup mode the home Wi-Fi
/// network through its setup access point (`wifi`, docs/wifi-setup.md). It shares no code with the agent or the
/// emulator.
@main
struct CompanionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replenish-companion",
        abstract: "Pair a device with an Amazon account from a laptop's browser, or give it the home Wi-Fi first.",
        subcommands: [PairCommand.self, WiFiCommand.self, ClaimCommand.self],
        defaultSubcommand: PairCommand.self)
}

/// `replenish-companion [pair]`: finds the device by DNS-SD (`avahi-browse`) or takes `--device`, checks the
/// device's proof of the setup key on its label (`--setup`), prints (or opens) LWA's authorize URL with the
/// device's challenge, receives the authorization code on a local redirect URI, and posts `companionInfo` with
/// its own proof.
struct PairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Pair a device in pairing mode with an Amazon account, from a laptop's browser.")

    @OptionGroup var label: LabelOptions

    @Option(help: "The LWA security profile's client id (the device's lwa.clientId).")
    var clientId: String

    @Option(help: "The device's pairing URL, such as http://192.168.1.20:8642 (default: found by DNS-SD).")
    var device: String?

    @OptionGroup var redirect: RedirectOptions

    @Flag(help: "Open the authorize URL with xdg-open as well as printing it.")
    var open = false

    @Option(help: "Seconds to wait for the customer's consent.")
    var timeout = 300

    func run() async throws {
        try await reportingFailures {
            let pairing = Pairing(
                clientId: clientId, device: device, redirect: redirect, openBrowser: open, timeout: timeout,
                discoveryWait: device == nil ? 15 : 0)
            try await pairing.run(label: label.label())
        }
    }
}

/// The device's label: its QR code's payload (`--setup`), or its serial and setup key typed in.
struct LabelOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The label's payload, RPL1:<serial>:<key> (replenish-agent label prints it).", valueName: "payload"))
    var setup: String?

    @Option(help: "The serial on the label, to type the label in by hand (with --key).")
    var serial: String?

    @Option(
        help: "The setup key as typed from the label: nine groups of four, the last the check group (with --serial).")
    var key: String?

    func validate() throws {
        guard (setup != nil) != (serial != nil || key != nil), setup != nil || (serial != nil && key != nil) else {
            throw ValidationError("give the label as --setup PAYLOAD (its QR code) or as --serial and --key (typed in)")
        }
    }

    func label() throws -> Label {
        try setup.map { try Label(payload: $0) } ?? Label(serial: serial ?? "", typedKey: key ?? "")
    }
}

/// Where LWA's consent page sends the customer back: the authorize endpoint and the local redirect URI.
struct RedirectOptions: ParsableArguments {
    @Option(help: "LWA's authorize endpoint.")
    var authorizeURL = "https://www.amazon.com/ap/oa"

    @Option(help: "The local port the redirect URI names (it must be registered in the security profile).")
    var redirectPort = 8643

    @Option(help: "The redirect URI registered in the security profile (default http://localhost:PORT/callback).")
    var redirectURI: String?
}

/// Runs `body`; a failure is said on standard error on one line (`replenish-companion: why`), and the command
/// exits 1.
func reportingFailures(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let exit as ExitCode {
        throw exit
    } catch {
        let text = ((error as? Failure)?.description ?? "\(error)").replacingOccurrences(of: "\n", with: " ")
        FileHandle.standardError.write(Data("replenish-companion: \(text)\n".utf8))
        throw ExitCode(1)
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
