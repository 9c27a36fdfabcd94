import ArgumentParser
import Foundation

/// `replenish-companion wifi`: hands a device in setup mode the home Wi-Fi network, as a phone app would
/// (docs/wifi-setup.md). It joins the device's setup access point with NetworkManager (`nmcli`; the name and
/// passphrase come from the label), lists the networks the device sees, sends the home network under the label's
/// proof, follows the device's join until `joined` or `failed`, leaves the access point, and pairs as `pair` does
/// (the device found by DNS-SD on the home network) unless `--no-pair`.
struct WiFiCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wifi",
        abstract: "Give a device in setup mode the home Wi-Fi network through its setup access point, then pair it.",
        discussion: """
            The home network's passphrase is read from --passphrase-file or typed at a prompt (echo off; one line \
            of standard input when that is not a terminal), never taken from the command line.
            """)

    /// Where the device serves the provisioning endpoints to a phone on its access point: NetworkManager's
    /// shared-mode gateway address, port 8644.
    static let setupURL = "http://10.42.0.1:8644"

    @OptionGroup var label: LabelOptions

    @Option(help: ArgumentHelp("The home network's name (SSID) for the device to join.", valueName: "name"))
    var ssid: String

    @Option(
        help: ArgumentHelp(
            "A file whose first line is the home network's passphrase (default: asked for at a prompt).",
            valueName: "file"))
    var passphraseFile: String?

    @Flag(help: "The home network is open (no passphrase).")
    var open = false

    @Flag(help: "The home network hides its name: send it though the device does not list it.")
    var hidden = false

    @Option(
        help: ArgumentHelp(
            "The Wi-Fi interface to join the setup access point on (default: NetworkManager's choice).",
            valueName: "ifname"))
    var interface: String?

    @Option(
        help: ArgumentHelp(
            "The setup endpoints' URL, when this machine is already on the setup access point "
                + "(default: it joins the access point with nmcli, then \(setupURL)).",
            valueName: "url"))
    var device: String?

    @Option(help: ArgumentHelp("Seconds to wait for the device to join the home network.", valueName: "seconds"))
    var timeout = 120

    @Flag(help: "Stop once the device joined the home network; do not pair it.")
    var noPair = false

    @Option(help: "For the pairing: the LWA security profile's client id (required unless --no-pair).")
    var clientId: String?

    @Option(
        help: ArgumentHelp(
            "For the pairing: the device's pairing URL on the home network (default: found by DNS-SD).",
            valueName: "url"))
    var pairDevice: String?

    @OptionGroup var redirect: RedirectOptions

    @Flag(help: "For the pairing: open the authorize URL with xdg-open as well as printing it.")
    var openBrowser = false

    @Option(help: ArgumentHelp("For the pairing: seconds to wait for the customer's consent.", valueName: "seconds"))
    var consentTimeout = 300

    func validate() throws {
        guard (1...32).contains(ssid.utf8.count) else { throw ValidationError("--ssid must be 1 to 32 bytes") }
        guard !(open && passphraseFile != nil) else {
            throw ValidationError("--open is for a network without a passphrase: leave out --passphrase-file")
        }
        guard device == nil || interface == nil else {
            throw ValidationError("--interface is for joining the access point; with --device none is joined")
        }
        guard timeout > 0 else { throw ValidationError("--timeout must be a number of seconds over 0") }
        guard noPair || clientId != nil else {
            throw ValidationError("give --client-id for the pairing that follows the join, or --no-pair")
        }
    }

    func run() async throws {
        try await reportingFailures {
            let label = try self.label.label()
            let passphrase = try open ? nil : Passphrase.read(file: passphraseFile, ssid: ssid)
            if let device {
                try await provision(SetupClient(base: device, label: label), passphrase: passphrase)
            } else {
                let link = try SetupAccessPointLink.join(label: label, interface: interface)
                do {
                    try await provision(SetupClient(base: Self.setupURL, label: label), passphrase: passphrase)
                } catch {
                    link.leave()
                    throw error
                }
                link.leave()
            }
            guard !noPair, let clientId else { return }
            say("pairing: looking for the device on \(Self.shown(ssid))")
            let pairing = Pairing(
                clientId: clientId, device: pairDevice, redirect: redirect, openBrowser: openBrowser,
                timeout: consentTimeout, discoveryWait: 90)
            try await pairing.run(label: label)
        }
    }

    /// Lists the networks, sends the home network, and follows the join until `joined` (or throws).
    private func provision(_ client: SetupClient, passphrase: String?) async throws {
        let sessionId: String
        let networks: [SetupClient.Network]
        do { (sessionId, networks) = try await client.networks() } catch let noAnswer as SetupClient.NoAnswer {
            throw Failure("no answer from the device's setup endpoints (is it in setup mode?): \(noAnswer)")
        }
        say(networks.isEmpty ? "the device sees no network" : "the device sees these networks:")
        for network in networks {
            say("  \(Self.shown(network.ssid)) (signal \(network.signal), \(network.security))")
        }
        if let listed = networks.first(where: { $0.ssid == ssid }) {
            switch (listed.security, passphrase) {
            case ("wpa", nil): throw Failure("\(Self.shown(ssid)) needs a passphrase: leave out --open")
            case ("open", _?): throw Failure("\(Self.shown(ssid)) is an open network: give --open")
            case ("unsupported", _): throw Failure("the device cannot join \(Self.shown(ssid)): unsupported security")
            default: break
            }
        } else if !hidden {
            throw Failure(
                "the device does not see \(Self.shown(ssid)): check the name, "
                    + "or give --hidden for a network that hides it"
            )
        }
        try await client.join(sessionId: sessionId, ssid: ssid, passphrase: passphrase, hidden: hidden)
        try await followJoin(client, sessionId: sessionId)
    }

    /// Asks for the join's state every second until `joined`, `failed` or `--timeout`, saying each new state.
    private func followJoin(_ client: SetupClient, sessionId: String) async throws {
        let deadline = ContinuousClock.now + .seconds(timeout)
        var last = ""
        var silent: SetupClient.NoAnswer?
        while ContinuousClock.now < deadline {
            do {
                let (state, joining) = try await client.state(sessionId: sessionId)
                silent = nil
                if state != "idle", joining != ssid {
                    throw Failure("the device reports \(state) for \(Self.shown(joining)), not \(Self.shown(ssid))")
                }
                if state == "joined" {
                    say("the device joined \(Self.shown(ssid))")
                    return
                }
                if state.hasPrefix("failed:") {
                    throw Failure("the device could not join \(Self.shown(ssid)): \(state.dropFirst("failed:".count))")
                }
                if state != last {
                    say(
                        state == "joining"
                            ? "the device is joining \(Self.shown(ssid))" : "the device's state: \(state)")
                }
                last = state
            } catch let noAnswer as SetupClient.NoAnswer {
                if silent == nil { say("no answer from the device (\(noAnswer.description)): asking again") }
                silent = noAnswer
            }
            try await Task.sleep(for: .seconds(1))
        }
        let why = silent.map { "; last: \($0.description)" } ?? (last.isEmpty ? "" : "; last state: \(last)")
        throw Failure("the device did not join \(Self.shown(ssid)) within \(timeout) s\(why)")
    }

    /// An SSID as printed: its control characters escaped, so that any SSID stays on its line.
    static func shown(_ ssid: String) -> String {
        ssid.unicodeScalars.map {
            $0.properties.generalCategory == .control ? $0.escaped(asASCII: true) : String($0)
        }.joined()
    }
}
