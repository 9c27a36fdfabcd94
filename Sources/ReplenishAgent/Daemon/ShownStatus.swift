import Logging

/// What `status` shows of the running daemon that no decision reads after a restart: the token state and its
/// reason, when the pairing window closes, and the code of code-based linking. It changes at every token
/// refresh, so it is not kept on flash: it lives in memory and in `shown-status.json` of the runtime directory
/// (`runtimeDirectory`, the unit's `RuntimeDirectory=`, a tmpfs), written on the disk lane without fsync. A
/// power cut takes nothing from it that the next start does not make anew. Where the runtime directory cannot
/// be written (the agent run by hand as a user who may not create `/run/replenish-agent`), it stays in memory
/// and `status` shows what the state directory's files tell.
struct ShownStatus: Codable, Sendable, Equatable, StateFormat {
    static let formatVersion = 1
    var version = ShownStatus.formatVersion
    /// The token lifecycle state (`TokenManager.State.name`) and its reason.
    var tokenState: TokenState.Kind?
    var tokenStateReason: String?
    /// When the open pairing window closes (wall-clock seconds); nil while it is closed.
    var pairingWindowClosesAt: Double?
    /// Code-based linking: the code the customer can enter, while it can be.
    var linking: LinkingCode?
    /// While the pairing window is open: whether the pairing port is advertised by DNS-SD, or why not
    /// (`AdvertisementStatus`); nil otherwise.
    var advertisement: String?

    static func path(runtimeDirectory: String) -> String { POSIX.join(runtimeDirectory, "shown-status.json") }
}

/// The daemon's single writer of the shown status (`ShownStatus`).
actor ShownStatusBook {
    private let path: String
    private let runtimeDirectory: String
    private let logger: Logger
    private(set) var shown = ShownStatus()
    /// The runtime directory refused a write: said once in the log, then the shown status stays in memory.
    private var refusalLogged = false

    init(runtimeDirectory: String, logger: Logger) {
        path = ShownStatus.path(runtimeDirectory: runtimeDirectory)
        self.runtimeDirectory = runtimeDirectory
        self.logger = logger
    }

    /// The token state `status` shows (never a token): its kind and why.
    func recordTokenState(_ state: TokenState) async {
        await change {
            $0.tokenState = state.kind
            $0.tokenStateReason = state.reason
        }
    }

    func recordPairingWindow(closesAt: Double?) async { await change { $0.pairingWindowClosesAt = closesAt } }

    func recordLinkingCode(_ code: LinkingCode?) async { await change { $0.linking = code } }

    func recordAdvertisement(_ text: String?) async { await change { $0.advertisement = text } }

    private func change(_ change: (inout ShownStatus) -> Void) async {
        var next = shown
        change(&next)
        guard next != shown else { return }
        shown = next
        let (path, directory) = (path, runtimeDirectory)
        do throws(AgentError) {
            let bytes = try StateFile.encode(next, for: path)
            // A tmpfs: nothing to make durable; the lane keeps the writes in order, and a stop does not wait for
            // one queued behind a flush of the flash. The directory is the daemon's (made at its start with the
            // boot's mark, `BootIdentity`), or made here, 0700, when it is missing.
            try await DiskLane.shared.runUnawaitedOnStop { () throws(AgentError) in
                if try POSIX.status(directory) == nil { try POSIX.makeDirectory(directory, 0o700) }
                try DiskLane.writeNow(bytes, to: path)
            }
        } catch {
            guard !refusalLogged else { return }
            refusalLogged = true
            logger.warning(
                "the runtime directory takes no writes: status shows the token state and pairing window only while this runs",
                metadata: ["error": "\(error.message)"])
        }
    }
}
