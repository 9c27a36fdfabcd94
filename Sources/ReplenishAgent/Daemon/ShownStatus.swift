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
    /// With `wifiSetup`: the setup mode as `WiFiSetupShown` says it (never a credential); nil while it is dormant.
    var wifiSetup: String?
    /// Program alexa: the claim and the reports, as `ReportStatusKeeper.line` says them.
    var reports: String?
    /// The run that wrote it (the lock's run id, `AgentRun.id`): while another run holds the lock, this file is
    /// a stopped run's, and `status` shows none of it (its window and advertisement closed with it).
    var run: String?

    static func path(runtimeDirectory: String) -> String { POSIX.join(runtimeDirectory, "shown-status.json") }
}

/// The daemon's single writer of the shown status (`ShownStatus`).
final actor ShownStatusBook {
    private let store: StateStore<ShownStatus>
    private let logger: Logger
    private(set) var shown: ShownStatus
    /// The runtime directory refused a write: said once in the log, then the shown status stays in memory.
    private var refusalLogged = false

    /// For the run `run` (`StateDirectory.run`), which every write carries.
    init(store: StateStore<ShownStatus>, run: String? = nil, logger: Logger) {
        self.store = store
        self.shown = ShownStatus(run: run)
        self.logger = logger
    }

    /// Over `shown-status.json` of `runtimeDirectory` (`StateStore.shownStatus`).
    init(runtimeDirectory: String, run: String? = nil, logger: Logger) {
        self.init(store: .shownStatus(runtimeDirectory: runtimeDirectory), run: run, logger: logger)
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

    func recordWiFiSetup(_ text: String?) async { await change { $0.wifiSetup = text } }

    func recordReports(_ text: String?) async { await change { $0.reports = text } }

    private func change(_ change: (inout ShownStatus) -> Void) async {
        var next = shown
        change(&next)
        guard next != shown else { return }
        shown = next
        await write(next)
    }

    /// `change`'s write, the same for every change (so each caller's `change` stays small).
    private func write(_ next: ShownStatus) async {
        do throws(AgentError) {
            // A tmpfs (`DiskLane.Medium.tmpfs`): nothing to make durable; the lane keeps the writes in order,
            // and a stop does not wait for one queued behind a flush of the flash. The directory is the daemon's
            // (made at its start with the boot's mark, `BootIdentity`), or made by the store, 0700, when missing.
            try await store.save(next)
        } catch {
            guard !refusalLogged else { return }
            refusalLogged = true
            logger.warning(
                "the runtime directory takes no writes: status shows the token state and pairing window only while this runs",
                metadata: ["error": "\(error.message)"])
        }
    }
}

extension StateStore<ShownStatus> {
    /// `shown-status.json` of the runtime directory (a tmpfs), on the daemon's lane; its one owner is `ShownStatusBook`.
    static func shownStatus(runtimeDirectory: String) -> Self {
        StateStore(path: ShownStatus.path(runtimeDirectory: runtimeDirectory), medium: .tmpfs)
    }
}
