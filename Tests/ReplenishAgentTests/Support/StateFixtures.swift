@testable import ReplenishAgent

/// The tests' fixtures read and write state files by path, through a store made for the one call (the agent's
/// own code names each file's store: `StateStore.outbox`, `.tokens`, …).
extension StateFile {
    static func load<T: StateFormat>(
        _ type: T.Type, from path: String, limit: Int = readLimit, onCorrupt: (String) -> Void
    ) throws(AgentError) -> T? {
        try StateStore<T>(path: path, limit: limit).load(onCorrupt: onCorrupt)
    }

    static func read<T: StateFormat>(
        _ type: T.Type, from path: String, limit: Int = readLimit, owner: UserID = POSIX.effectiveUserID()
    ) throws(AgentError) -> Reading<T> {
        try StateStore<T>(path: path, limit: limit).read(owner: owner)
    }
}

extension DiskLane {
    static func saveNow<T: StateFormat>(_ value: T, to path: String) throws(AgentError) {
        try StateStore<T>(path: path).saveNow(value)
    }
}
