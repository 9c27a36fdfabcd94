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

    func run() async throws {
        let config = try options.load()
        guard let key = config.pairingSetupKey else {
            Output.error("label: pairing.setupKeyFile is not set; make one with replenish-agent make-setup-key PATH")
            throw ExitCode(1)
        }
        let payload = LabelPayload(serial: config.device.serial, key: key)
        if manual {
            Output.line("serial: \(payload.serial)")
            Output.line("setup key: \(payload.manualEntryKey)")
        } else {
            Output.line(payload.text)
        }
    }
}
