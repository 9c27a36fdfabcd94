import ArgumentParser

/// `make-setup-key PATH`: the factory's step that makes a unit's setup key (`pairing.setupKeyFile`): 16 bytes
/// from the system's CSPRNG written as 32 lowercase hex digits and a newline, mode 0600. It refuses a file that
/// exists (a new key would no longer match the printed label). The key is not printed: `label` prints it for
/// the label.
struct MakeSetupKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "make-setup-key",
        abstract: "Make a unit's setup key file (factory step; mode 600; an existing file is never replaced).",
        discussion: """
            Then give it to the agent's user (chown replenish PATH), name it in the config \
            (pairing.setupKeyFile) and print the label with `replenish-agent label`.
            """)

    @Argument(help: "Where to write the key (for example /etc/replenish-agent/setup-key).")
    var path: String

    func run() async throws {
        var generator = SystemRandomNumberGenerator()
        let key = SetupKey(using: &generator)
        do {
            // Never over an existing key (link fails on one): a new key would not match the unit's label.
            try POSIX.writeNewPrivateFile(path, Array((key.hex + "\n").utf8), replace: false)
        } catch {
            if error.systemError?.errno == Errno.exists {
                Output.error(
                    "make-setup-key: \(path) exists; a new key would not match the unit's label (remove it first)")
            } else {
                Output.error("make-setup-key: \(error.message)")
            }
            throw ExitCode(1)
        }
        Output.line(
            "setup key written to \(path) (mode 600); give it to the agent's user (chown replenish \(path)) and print the label with: replenish-agent label"
        )
    }
}
