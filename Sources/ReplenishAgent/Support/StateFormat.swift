/// The one rule for the format of every state file (`tokens.json`, `outbox.json`, `status.json`), so that an
/// update or a rollback never un-pairs the device or drops a queued press:
///
/// - every file carries `version`, an integer; a writer always writes its own `formatVersion`;
/// - a reader accepts versions `1...formatVersion + 1`: its own, every older one, and the next one, which a
///   newer build may have written before the device was rolled back. Fields it does not know are ignored;
///   fields added since an older version decode with a default;
/// - so a new version only adds fields (with defaults) to the one before it. A change that an older build must
///   not read (a field that changes meaning) skips a version (`formatVersion + 2`), which older builds move aside;
/// - a file whose version is outside that range, or that does not decode, is moved aside and reported
///   (`StateFile`); a file is never moved aside for its version alone when its content can be read.
///
/// `Tests/ReplenishAgentTests/Fixtures` holds a file of every version the agent has written, and of the next
/// version with fields this build does not know; the tests load each one.
protocol StateFormat: FileFormat, Codable {
    /// The version this build writes.
    static var formatVersion: Int { get }
    /// The version read from the file; `StateFile` sets it to `formatVersion` once the file is read, so the
    /// value in memory, and what is written back, is always this build's format.
    var version: Int { get set }
}

extension StateFormat {
    /// The versions this build reads.
    static var readableVersions: ClosedRange<Int> { 1...(formatVersion + 1) }
}

/// How a state file's bytes become its value and back (`StateStore`): JSON under `StateFormat`'s rule for every
/// file of the state directory and the shown status; one line of text for the boot's mark (`BootMark`).
protocol FileFormat: Sendable {
    /// The value in `bytes`, or why they are not one (a reason that quotes nothing of the file).
    static func decoded(from bytes: [UInt8]) -> Result<Self, StateFile.FormatProblem>
    /// The bytes of the value, for the file at `path` (named in the error).
    func encoded(for path: String) throws(AgentError) -> [UInt8]
}
