import ArgumentParser

/// `make-setup-key PATH`: the factory's step that makes a unit's setup key (`pairing.setupKeyFile`): 16 bytes
/// from the system's CSPRNG written as 32 lowercase hex digits and a newline, mode 0600. It refuses a file that
/// exists (a new key would no longer match the printed label). The key is not printed: `label` prints it for
/// the label. `--rotate` replaces the key of an unpaired unit (a refurbished or resold one, whose label is
/// printed again); a paired unit's key is never replaced.
struct MakeSetupKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "make-setup-key",
        abstract: "Make a unit's setup key file (factory step; mode 600; --rotate replaces an unpaired unit's key).",
        discussion: """
            Then give it to the agent's user (chown replenish PATH), name it in the config \
            (pairing.setupKeyFile) and print the label with `replenish-agent label`. With --rotate, the unit \
            of --config must not be paired (reset it first); restart the agent so it reads the new key, and \
            print and stick on the new label.
            """)

    @OptionGroup var options: ConfigOption

    @Argument(help: "Where to write the key (for example /etc/replenish-agent/setup-key).")
    var path: String

    @Flag(help: "Replace the existing key of an unpaired unit (the unit of --config): a refurbished or resold unit.")
    var rotate = false

    func run() async throws {
        if rotate { try refuseWhilePaired() }
        var generator = SystemRandomNumberGenerator()
        let key = SetupKey(using: &generator)
        do {
            // Never over an existing key unless rotating (link fails on one): it would not match the label.
            try POSIX.writeNewPrivateFile(path, Array((key.hex + "\n").utf8), replace: rotate)
        } catch {
            if error.systemError?.errno == Errno.exists {
                Output.error(
                    "make-setup-key: \(path) exists; a new key would not match the unit's label (to replace the key of an unpaired unit and reprint its label: make-setup-key --rotate)"
                )
            } else {
                Output.error("make-setup-key: \(error.message)")
            }
            throw ExitCode(1)
        }
        if rotate {
            Output.line(
                "new setup key written to \(path) (mode 600, its owner kept): restart the agent so it reads it (systemctl restart replenish-agent), print the new label (replenish-agent label) and stick it over the old one"
            )
        } else {
            Output.line(
                "setup key written to \(path) (mode 600); give it to the agent's user (chown replenish \(path)) and print the label with: replenish-agent label"
            )
        }
    }

    /// A paired unit keeps its key: its customer's label must stay valid, and a new key would not undo the
    /// pairing. The unit is the one `--config` names (its state directory).
    private func refuseWhilePaired() throws {
        let config = try options.load()
        let tokens: TokenSet?
        do {
            tokens = try FileTokenStore.peek(
                stateDirectory: config.stateDirectory, on: DiskLane.Context.beforeServing())
        } catch {
            Output.error("make-setup-key: cannot tell whether the unit is paired: \(error.message)")
            throw ExitCode(1)
        }
        if tokens != nil {
            Output.error(
                "make-setup-key: the unit is paired: its key is not replaced (the customer's label stays valid, and a new key would not end the pairing); reset it first (replenish-agent reset), then rotate"
            )
            throw ExitCode(1)
        }
    }
}
