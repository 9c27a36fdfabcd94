import FoundationEssentials

/// One state file of the agent: where it is (`path`), what it holds (`Value`, whose `FileFormat` turns it into
/// bytes and back), where it lives (`medium`) and the lane that carries its work (`lane`). Each file has one
/// store, made by a factory beside its owner (`StateStore<Outbox>.outbox`, `.tokens`, `.subscriptionRecord`,
/// `.deregistration`, `.resetMark`, `.shownStatus`, `.bootMark`) and held by that owner; every load, save, shred and
/// move-aside of the file runs through it, so that `save` and `saveNow` are the only ways the file is written.
///
/// Reading follows `StateFile`'s rules (no symbolic link followed, the agent's own regular file within the size
/// limit, a file that fails them moved aside with the reason). The daemon, once its loop serves, writes and
/// shreds on the lane (`save`, `shred`) and reads there (`loadOnLane`); the synchronous methods (`read`, `load`,
/// `saveNow`, `shredNow`, `moveAside`) run on the calling thread and take a `DiskLane.Context`, which exists only
/// in work on a lane and, through `DiskLane.Context.beforeServing`, for the commands that run without the daemon
/// and the daemon's start before its loop serves.
struct StateStore<Value: FileFormat>: Sendable {
    let path: String
    let lane: DiskLane
    /// Where the file lives: the flash, or the runtime directory's tmpfs (`DiskLane.Medium`).
    let medium: DiskLane.Medium
    /// The largest file this store reads (`StateFile.readBytes`).
    let limit: Int
    /// A `save` to the flash under way when the agent stops may be given up at the stop's bound, before its
    /// rename (`DiskLane.write`): for a file whose write a restart does again or need not (the outbox, the status
    /// record), never for the tokens.
    let boundedAtStop: Bool

    init(
        path: String, lane: DiskLane = .shared, medium: DiskLane.Medium = .flash, limit: Int = StateFile.readLimit,
        boundedAtStop: Bool = false
    ) {
        self.path = path
        self.lane = lane
        self.medium = medium
        self.limit = limit
        self.boundedAtStop = boundedAtStop
    }

    // MARK: Reading

    /// The file's value without side effects (`status`, and `load`). `owner` is the agent's uid: this process's
    /// in the daemon; a command run from a root shell passes the directory owner's (`StateDirectory.agentUID`).
    func read(on lane: borrowing DiskLane.Context, owner: UserID = POSIX.effectiveUserID()) throws(AgentError)
        -> StateFile.Reading<Value>
    {
        switch try readBytes(on: lane, owner: owner) {
        case .missing: return .missing
        case .unusable(let reason): return .unusable(reason: reason)
        case .read(let bytes):
            switch Value.decoded(from: bytes) {
            case .success(let value): return .read(value)
            case .failure(let problem): return .unusable(reason: problem.reason)
            }
        }
    }

    /// The file's bytes under the reading rules, undecoded (what an earlier build kept there: `LegacyOrders`).
    func readBytes(on lane: borrowing DiskLane.Context, owner: UserID = POSIX.effectiveUserID()) throws(AgentError)
        -> StateFile.Reading<[UInt8]>
    {
        try StateFile.readBytes(path, limit: limit, owner: owner, on: lane)
    }

    /// The file's value, nil when missing; a file that cannot be used is moved aside and `onCorrupt` told why and
    /// where it went. On the calling thread (start-up, commands, a lane).
    func load(on lane: borrowing DiskLane.Context, onCorrupt: (String) -> Void) throws(AgentError) -> Value? {
        switch try read(on: lane) {
        case .missing: return nil
        case .read(let value): return value
        case .unusable(let reason):
            let aside = try moveAside(on: lane)
            onCorrupt("state file \(path) \(reason); it was moved to \(aside)")
            return nil
        }
    }

    /// `load` on the lane, after the writes submitted before it; the problems come back to be logged by the
    /// caller.
    func loadOnLane(isolation: isolated (any Actor)? = #isolation) async throws(AgentError) -> (
        value: Value?, problems: [String]
    ) {
        let store = self
        return try await lane.run(isolation: isolation) { context throws(AgentError) in
            var problems: [String] = []
            let value = try store.load(on: context) { problems.append($0) }
            return (value, problems)
        }
    }

    /// Renames the file aside (`StateFile.moveAside`) and returns the new name. On the calling thread.
    func moveAside(on lane: borrowing DiskLane.Context) throws(AgentError) -> String {
        try StateFile.moveAside(path, on: lane)
    }

    // MARK: Writing

    /// Writes `value` on the lane, in order with the work submitted before it (`DiskLane.write`; `DiskLane.Medium`
    /// says what a stopping caller waits for). Encoded on the caller's thread (a few hundred bytes): only system
    /// calls go to the lane. Never inlined: one copy per kind of file, not one in each caller (a smaller binary).
    @inline(never)
    func save(_ value: Value, isolation: isolated (any Actor)? = #isolation) async throws(AgentError) {
        try await lane.write(
            isolation: isolation, try value.encoded(for: path), to: path, on: medium, boundedAtStop: boundedAtStop)
    }

    /// Writes `value` now, on the calling thread: only for the commands that run without the daemon, the
    /// daemon's start before its loop serves, and work already on a lane (a reset's wipe). The daemon otherwise
    /// writes with `save`.
    func saveNow(_ value: Value, on lane: borrowing DiskLane.Context) throws(AgentError) {
        let bytes = try value.encoded(for: path)
        if medium == .tmpfs { try DiskLane.makeParentDirectory(of: path, on: lane) }
        try POSIX.writeFileAtomically(path, bytes, durable: medium == .flash)
    }

    /// Overwrites the file with zeros, syncs and unlinks it (`POSIX.shred`), on the lane. Something else at the
    /// file's name (a directory) makes it fail: the wipe stops and is finished at the next start.
    func shred(isolation: isolated (any Actor)? = #isolation) async throws(AgentError) {
        let store = self
        try await lane.run(isolation: isolation) { context throws(AgentError) in try store.shredNow(on: context) }
    }

    /// `shred` on the calling thread (the same callers as `saveNow`). `includingADirectory`: whatever stands at
    /// the name goes, a directory too (`POSIX.shredEntry`: the reset's mark, which must not outlive its wipe).
    func shredNow(on lane: borrowing DiskLane.Context, includingADirectory: Bool = false) throws(AgentError) {
        if includingADirectory { try POSIX.shredEntry(path) } else { try POSIX.shred(path) }
    }

    /// Runs `work` on this store's lane (after the writes submitted before it), with the lane's context: a
    /// state file's other blocking work in the daemon (a reset's wipe, a serial re-read), never on the loop.
    func onLane<T: Sendable>(
        isolation: isolated (any Actor)? = #isolation,
        _ work: @escaping @Sendable (borrowing DiskLane.Context) throws(AgentError) -> T
    ) async throws(AgentError) -> T {
        try await lane.run(isolation: isolation, work)
    }
}

/// How a store turns a state of the state directory into its bytes and back: JSON under `StateFormat`'s rule.
extension StateFormat {
    /// JSON under `StateFormat`'s version rule (`StateFile.decode`).
    static func decoded(from bytes: [UInt8]) -> Result<Self, StateFile.FormatProblem> {
        StateFile.decode(Self.self, from: bytes)
    }

    /// JSON in this build's `formatVersion`, keys sorted (a file that did not change is written the same).
    func encoded(for path: String) throws(AgentError) -> [UInt8] {
        var current = self
        current.version = Self.formatVersion
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do { return Array(try encoder.encode(current)) } catch { throw AgentError(.storage, "cannot encode \(path)") }
    }
}
