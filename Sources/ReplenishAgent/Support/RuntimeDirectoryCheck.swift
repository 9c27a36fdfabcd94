/// Whether the agent can use its runtime directory (`runtimeDirectory`, where it marks the boot:
/// `BootIdentity`). Without it a restart cannot tell this boot from another when the kernel's boot id is hidden,
/// so it is never a silent mode: `check-config` reports it and `run` logs it at its start.
enum RuntimeDirectoryCheck {
    /// What keeps the agent (this process, as it runs now: inside the unit's sandbox for `run` and
    /// `check-config --before-run`) from writing in `path`, or nil. A missing directory is only a problem when
    /// it cannot be made: the shipped unit's `RuntimeDirectory=` makes the default one at its start.
    static func problem(_ path: String) -> String? {
        let info: FileInfo?
        do { info = try POSIX.status(path) } catch { return error.message }
        if let info {
            guard info.kind == .directory else { return "\(path) is not a directory" }
            if let why = POSIX.cannotWriteIn(path) { return "\(path) cannot be written: \(why)" }
            return nil
        }
        if path == AgentConfig.defaultRuntimeDirectory { return nil }
        let parent = POSIX.parentDirectory(of: path)
        if let why = POSIX.cannotWriteIn(parent) {
            return "\(path) does not exist and cannot be made in \(parent): \(why)"
        }
        return nil
    }

    /// A note for a runtime directory the shipped unit does not make: its sandbox (`ProtectSystem=strict`)
    /// leaves every other path under /run read-only to the agent.
    static func note(_ path: String) -> String? {
        guard path != AgentConfig.defaultRuntimeDirectory else { return nil }
        return """
            runtimeDirectory \(path) is not the shipped unit's RuntimeDirectory= \
            (\(AgentConfig.defaultRuntimeDirectory)): under that unit (ProtectSystem=strict) the agent can write it \
            only when a drop-in adds it to ReadWritePaths=
            """
    }
}
