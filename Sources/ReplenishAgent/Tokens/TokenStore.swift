import FoundationEssentials

/// Durable storage of the device's tokens. The refresh token is the device's pairing: losing it means the
/// customer must pair again, so writes replace the file atomically and never delete before writing.
protocol TokenStore: Sendable {
    /// The tokens at the daemon's start (before its loop serves), nil when there are none.
    func load(on lane: borrowing DiskLane.Context) throws(AgentError) -> TokenSet?
    /// Writes the tokens durably, off the event loop; writes asked for by one actor (`isolation`) land in the
    /// order it asked.
    func save(_ tokens: TokenSet, isolation: isolated (any Actor)?) async throws(AgentError)
    /// Forgets the tokens (the customer removed the device, or it was deregistered).
    func wipe(isolation: isolated (any Actor)?) async throws(AgentError)
}

/// `tokens.json` under the state directory, mode 0600, replaced atomically, through its store (`file`).
struct FileTokenStore: TokenStore {
    let file: StateStore<TokenSet>
    var path: String { file.path }

    init(stateDirectory: String) { file = .tokens(stateDirectory: stateDirectory) }

    /// The token file is small; anything larger is not one.
    static let readLimit = 1 << 20

    /// The tokens, nil when there is no token file. A file that cannot be used (see `StateFile`: not a regular
    /// file, another owner, too large, a format version this build cannot read, corrupt, or without a refresh
    /// token) is moved aside, kept for inspection, and reported by the error: the device is then unpaired.
    func load(on lane: borrowing DiskLane.Context) throws(AgentError) -> TokenSet? {
        let reason: String
        switch try Self.read(file, on: lane) {
        case .missing: return nil
        case .read(let tokens): return tokens
        case .unusable(let why): reason = why
        }
        let aside = try file.moveAside(on: lane)
        throw AgentError(
            .storage, "state file \(path) \(reason); it was moved to \(aside); the device must be paired again")
    }

    /// Reads the token file without the side effects of `load` (no moving aside): for `status`, whose `owner`
    /// is the agent's uid as `StateDirectory.agentUID` knows it.
    static func read(
        _ file: StateStore<TokenSet>, owner: UserID = POSIX.effectiveUserID(), on lane: borrowing DiskLane.Context
    ) throws(AgentError) -> StateFile.Reading<TokenSet> {
        switch try file.read(on: lane, owner: owner) {
        case .missing: return .missing
        case .unusable(let reason): return .unusable(reason: reason)
        case .read(let tokens):
            guard !tokens.refreshToken.value.isEmpty else { return .unusable(reason: "holds no refresh token") }
            return .read(tokens.withSaneExpiry)
        }
    }

    /// On the disk lane (`DiskLane`). A stop (the caller cancelled) waits for the new file's rename, not for the
    /// directory's flush after it: a rotated refresh token is in place for the restart and the stop stays
    /// bounded on a flash whose flushes stall.
    func save(_ tokens: TokenSet, isolation: isolated (any Actor)? = #isolation) async throws(AgentError) {
        try await file.save(tokens, isolation: isolation)
    }

    /// Overwritten with zeros, synced, then unlinked, on the disk lane: the refresh token does not stay in freed
    /// blocks.
    func wipe(isolation: isolated (any Actor)? = #isolation) async throws(AgentError) {
        try await file.shred(isolation: isolation)
    }
}

extension FileTokenStore {
    /// Reads the token file of `stateDirectory` without the side effects of `load` (no moving aside), as the
    /// agent's user (`StateDirectory.agentUID`): for the commands (`status`, `check-config`, `make-setup-key`) and a
    /// reset's wipe finished at the start.
    static func peek(stateDirectory: String, on lane: borrowing DiskLane.Context) throws(AgentError) -> TokenSet? {
        let store = FileTokenStore(stateDirectory: stateDirectory)
        switch try read(store.file, owner: StateDirectory.agentUID(stateDirectory), on: lane) {
        case .missing: return nil
        case .read(let tokens): return tokens
        case .unusable(let reason): throw AgentError(.storage, "\(store.path) \(reason)")
        }
    }
}

extension StateStore<TokenSet> {
    /// `tokens.json` of `stateDirectory`, on the daemon's lane; its one owner is `FileTokenStore`.
    static func tokens(stateDirectory: String) -> Self {
        StateStore(path: POSIX.join(stateDirectory, "tokens.json"), limit: FileTokenStore.readLimit)
    }
}
