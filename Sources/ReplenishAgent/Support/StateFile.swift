import FoundationEssentials

/// Reading and writing the agent's JSON state files (outbox, status) under the state directory: atomic
/// replacement on write; a corrupt file is moved aside with a timestamp and reported, never deleted.
enum StateFile {
    /// Decodes the file at `path`, nil when missing. A corrupt file is moved aside and `onCorrupt` told.
    static func load<T: Decodable>(_ type: T.Type, from path: String, onCorrupt: (String) -> Void) throws(AgentError)
        -> T?
    {
        guard let bytes = try POSIX.readFile(path, limit: 4 << 20) else { return nil }
        if let value = try? JSONDecoder().decode(T.self, from: Data(bytes)) { return value }
        let aside = try moveAside(path)
        onCorrupt("\(path) was corrupt and was moved to \(aside)")
        return nil
    }

    static func save<T: Encodable>(_ value: T, to path: String) throws(AgentError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes: [UInt8]
        do { bytes = Array(try encoder.encode(value)) } catch { throw AgentError(.storage, "cannot encode \(path)") }
        try POSIX.writeFileAtomically(path, bytes)
    }

    /// Renames `path` to `path.corrupt-<epoch seconds>` and returns the new name.
    static func moveAside(_ path: String) throws(AgentError) -> String {
        let aside = "\(path).corrupt-\(Int(POSIX.wallTime()))"
        if rename(path, aside) != 0 { throw POSIX.storageError("rename", path) }
        try POSIX.syncDirectory(POSIX.parentDirectory(of: path))
        return aside
    }
}

#if canImport(Glibc)
    import Glibc
#endif
