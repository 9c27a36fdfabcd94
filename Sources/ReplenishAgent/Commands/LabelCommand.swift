import ArgumentParser

/// `label`: what the unit's label carries (`LabelPayload`): the QR code's text, one line, for
/// `replenish-agent label | qrencode -o label.png`; with `--manual`, the serial and the key in groups for
/// typing in by hand. It prints the setup key, which is its purpose: run it at the factory, never into a log.
struct LabelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "label",
        abstract: "Print the label's QR payload (serial and setup key); --manual for the typed-in form.")

    @OptionGroup var options: ConfigOption

    @Flag(name: .long, help: "Print the serial and the key in groups of four, for typing in by hand.")
    var manual = false

    @Option(
        name: .long,
        help: "Check a scanned label's payload against this unit (ready-to-box step): exit 0 when it is this unit's.")
    var check: String?

    func run() async throws {
        let config = try options.load()
        guard let key = config.pairingSetupKey else {
            Output.error("label: pairing.setupKeyFile is not set; make one with replenish-agent make-setup-key PATH")
            throw ExitCode(1)
        }
        let payload = LabelPayload(serial: config.device.serial, key: key)
        if let check {
            // What the scanner read: never printed back (it holds a key), only what differs.
            guard let scanned = LabelPayload(text: check.filter { !$0.isWhitespace }) else {
                Output.error("label: the scanned text is not a label's payload (RPL1:<serial>:<32 hex digits>)")
                throw ExitCode(1)
            }
            guard scanned.serial == payload.serial else {
                Output.error(
                    "label: the label is another unit's: its serial is \(scanned.serial), this unit's is \(payload.serial)"
                )
                throw ExitCode(1)
            }
            guard scanned.key == payload.key else {
                Output.error(
                    "label: the label has this unit's serial \(payload.serial) but another setup key: print this unit's label again (replenish-agent label)"
                )
                throw ExitCode(1)
            }
            Output.line("label matches this unit (serial \(payload.serial))")
        } else if manual {
            Output.line("serial: \(payload.serial)")
            Output.line("setup key: \(payload.manualEntryKey)")
        } else {
            Output.line(payload.text)
        }
    }
}
