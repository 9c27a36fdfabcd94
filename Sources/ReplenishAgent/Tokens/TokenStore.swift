import FoundationEssentials

/// Durable storage of the device's tokens. The refresh token is the device's pairing: losing it means the
/// customer must pair again, so writes replace the file atomically and never delete before writing.
protocol TokenStore: Sendable {
    func load() throws(AgentError) -> TokenSet?
    func save(_ tokens: TokenSet) throws(AgentError)
    /// Forgets the tokens (the customer removed the device, or it was deregistered).
    func wipe() throws(AgentError)
}

/// `tokens.json` under the state directory, mode 0600, replaced atomically.
struct FileTokenStore: TokenStore {
    let path: String

    init(stateDirectory: String) { path = POSIX.join(stateDirectory, "tokens.json") }

    func load() throws(AgentError) -> TokenSet? {
        guard let bytes = try POSIX.readFile(path) else { return nil }
        do {
            let tokens = try JSONDecoder().decode(TokenSet.self, from: Data(bytes))
            guard tokens.version == 1, !tokens.refreshToken.value.isEmpty else {
                throw AgentError(.storage, "unsupported token file version")
            }
            return tokens.withSaneExpiry
        } catch {
            // A torn or corrupt file is kept for inspection, never silently deleted.
            let aside = try StateFile.moveAside(path)
            throw AgentError(
                .storage, "\(path) was unreadable and was moved to \(aside); the device must be paired again")
        }
    }

    func save(_ tokens: TokenSet) throws(AgentError) {
        let bytes: [UInt8]
        do {
            bytes = Array(try JSONEncoder().encode(tokens))
        } catch {
            throw AgentError(.storage, "cannot encode tokens")
        }
        try POSIX.writeFileAtomically(path, bytes)
    }

    func wipe() throws(AgentError) { try POSIX.removeFile(path) }
}
