/// The setup key file `pairing.setupKeyFile` names, and why a config without one is refused or warned about.
extension AgentConfig {
    /// Why a production config without a setup key is refused.
    static let setupKeyRequiredInProduction =
        "is required in the production phase: the setup key on the device's label lets the customer's phone tell the device from an impostor on the network (make it with replenish-agent make-setup-key PATH)"

    /// Why a test or certification config without a setup key is only warned about (`check-config`, `run`).
    static let setupKeyMissingWarning =
        "pairing.setupKeyFile: not set; pairing works without proofs (any host on the network could pose as the device, or pair it first), which the production phase refuses"

    /// The setup key in `path`: 32 lowercase hex digits and at most a newline, in a file that only its owner
    /// may read (no group or other bits), owned by the agent's user (`agentUID`, nil when it cannot be known:
    /// a root shell before the package made the user): a key file that another user owns could be read, or
    /// swapped, by that user. Problems name `pairing.setupKeyFile` and never show the contents.
    static func readSetupKeyFile(_ path: String, agentUID: UserID?, problems: inout Problems) -> SetupKey? {
        let key = "pairing.setupKeyFile"
        guard
            let bytes = problems.readFile(
                path, key: key, missing: "no such file \(path) (the factory makes it: replenish-agent make-setup-key)",
                limit: 4096)
        else { return nil }
        guard let setupKey = SetupKey(fileContents: bytes) else {
            problems.add(
                key, "\(path) does not hold a setup key: 32 lowercase hex digits (16 bytes), then at most a newline")
            return nil
        }
        do {
            if let info = try POSIX.status(path), info.isReachableByOthers {
                problems.add(
                    key,
                    "\(path) holds the setup key and group or others may access it (mode \(info.octalPermissions)); chmod 600, owned by the agent's user"
                )
                return nil
            }
            if let info = try POSIX.status(path), info.permissions & 0o400 == 0 {
                problems.add(
                    key,
                    "\(path) holds the setup key and its owner may not read it (mode \(info.octalPermissions)); chmod 600"
                )
                return nil
            }
            if let agentUID, let info = try POSIX.status(path), info.owner != agentUID {
                problems.add(
                    key,
                    "\(path) holds the setup key and is owned by uid \(info.owner), not the agent's user (uid \(agentUID)); chown it to the agent's user (chown \(StateDirectory.packageUser) \(path))"
                )
                return nil
            }
        } catch {
            problems.add(key, error.message)
            return nil
        }
        return setupKey
    }
}
