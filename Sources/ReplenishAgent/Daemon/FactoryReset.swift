import Logging

/// Factory reset and owner change: the device leaves the customer's account (DRS deregistration, now or
/// queued until the network is back), forgets the pairing, the queued presses and what it knew
/// (`tokens.json`, `outbox.json`, `status.json`, every moved-aside `*.corrupt-*` copy, each overwritten with
/// zeros before it is unlinked), and opens the pairing window for the next owner. Started by `replenish-agent
/// reset` (through the control socket when the daemon runs, on the files when it does not) or by the button
/// gesture (a long press, and a second long press within 30 s to confirm).
struct FactoryReset<C: Clock>: Sendable where C.Duration == Duration {
    let stateDirectory: String
    let tokens: TokenManager<C>
    let orders: DeliveryLoop<C>
    let subscriptionBook: SubscriptionBook
    let deregistration: DeregistrationQueue<C>
    let logger: Logger
    /// How the device pairs again, for the answer (the pairing window, or code-based linking).
    var pairingAgain = "pairing window open"
    /// Runs once the reset's local part is over, done or failed (not when the directory refused a write up
    /// front): the pairing window's state or the code being shown goes back into `status.json`, which the reset
    /// wiped or forgot the account in.
    var afterWipe: @Sendable () async -> Void = {}

    /// What goes (`ResetWipe.Scope`): everything, or only the pairing and what belongs to the account.
    typealias Scope = ResetWipe.Scope

    /// Carries the reset out in the running daemon: all of it or nothing. The local part is shown possible
    /// first (the state directory takes a write, moved-aside copies go) and the wipe's mark is written
    /// (`ResetWipe`), before DRS hears anything; then the DRS call is queued durably with the newest refresh
    /// token, the pairing and files are wiped, the mark removed, and only then is DRS asked (once now, then
    /// retried by the queue until it answers). A wipe cut short (a SIGKILL, a power cut, a write that fails)
    /// keeps its mark, and the next start finishes it before it reads any state.
    /// `tellDRSNow: false` leaves the DRS call to the queue's own loop (at start, before the services run).
    func perform(reason: String, scope: Scope = .everything, tellDRSNow: Bool = true) async
        -> Result<String, AgentError>
    {
        let (directory, pairingId) = (stateDirectory, await tokens.pairingId)
        do {
            // On the disk lane, as every write of the daemon (`DiskLane`).
            try await StateStore<ResetWipe.Mark>.resetMark(stateDirectory: directory).onLane {
                lane throws(AgentError) in
                try POSIX.checkWritable(directory)
                // Moved-aside copies of a damaged token file may hold a token: they go either way.
                try Self.shredMovedAside(stateDirectory: directory)
                try ResetWipe.begin(scope, pairingId: pairingId, stateDirectory: directory, on: lane)
            }
        } catch {
            return .failure(
                AgentError(error.code, "nothing was reset, DRS was not told: \(error.message)", cause: error))
        }
        let old: TokenSet?
        do {
            if let current = await tokens.currentTokens {
                try await deregistration.enqueue(.init(refreshToken: current.refreshToken, clientId: current.clientId))
            }
            old = try await tokens.unpair(reason: reason)
            // A refresh that rotated the token between the two reads: the queue keeps the newest.
            if let old, old.refreshToken != (await tokens.currentTokens)?.refreshToken {
                try await deregistration.enqueue(.init(refreshToken: old.refreshToken, clientId: old.clientId))
            }
            switch scope {
            case .everything:
                try await orders.wipe()
                try await subscriptionBook.wipe()
            case .pairing:
                // The queued presses go; the order history stays for the owner to read.
                try await orders.forgetAccount(reason: reason)
                try await subscriptionBook.forgetAccount()
            }
            try await StateStore<ResetWipe.Mark>.resetMark(stateDirectory: directory).onLane {
                lane throws(AgentError) in try ResetWipe.end(stateDirectory: directory, on: lane)
            }
        } catch {
            await afterWipe()
            logger.error(
                "the reset's wipe stopped; the next start finishes it", metadata: ["error": "\(error.message)"])
            return .failure(error)
        }
        await afterWipe()
        var deregistered = "the device was not paired"
        if old != nil, !tellDRSNow {
            await deregistration.leaveToTheQueue()
            deregistered = "deregistration queued"
        } else if let old {
            let stillGood = old.accessTokenExpiresAt > POSIX.wallTime() + 60
            if let error = await deregistration.tryNow(accessToken: stillGood ? old.accessToken : nil) {
                deregistered = "deregistration queued (\(error.message))"
            } else {
                deregistered = "deregistered from DRS"
                logger.info("deregistered from DRS")
            }
        }
        switch scope {
        case .everything:
            logger.notice("factory reset", metadata: ["reset.reason": "\(reason)"])
            return .success("reset: \(deregistered); tokens, queued presses and subscriptions wiped; \(pairingAgain)")
        case .pairing:
            logger.notice("deregistered", metadata: ["reset.reason": "\(reason)"])
            return .success("deregister: \(deregistered); tokens and queued presses wiped; \(pairingAgain)")
        }
    }

    /// The reset while no daemon runs (the caller holds the state directory's lock): the deregistration is
    /// queued for the next start, and the files go. Nothing is changed unless the directory takes writes. A wipe
    /// an earlier reset left unfinished is finished first.
    static func performOffline(stateDirectory: String, on lane: borrowing DiskLane.Context) throws(AgentError)
        -> String
    {
        try POSIX.checkWritable(stateDirectory)
        try ResetWipe.finishInterrupted(stateDirectory: stateDirectory, on: lane) { _ in }
        try shredMovedAside(stateDirectory: stateDirectory)
        try ResetWipe.begin(.everything, stateDirectory: stateDirectory, on: lane)
        let old = try ResetWipe.wipeFiles(.everything, stateDirectory: stateDirectory, on: lane) { _ in }
        try ResetWipe.end(stateDirectory: stateDirectory, on: lane)
        return old != nil
            ? "reset: tokens, queued presses and subscriptions wiped; the agent deregisters from DRS when it next runs"
            : "reset: tokens, queued presses and subscriptions wiped (the device was not paired)"
    }

    /// Every moved-aside copy (`*.corrupt-*`), a directory that once stood where a state file belongs too.
    static func shredMovedAside(stateDirectory: String) throws(AgentError) {
        for name in try POSIX.directoryEntries(stateDirectory) where StateDirectory.isMovedAside(name) {
            try POSIX.shredEntry(POSIX.join(stateDirectory, name))
        }
    }
}

/// A reset's wipe, resumable: before the first file goes, the reset writes `wipe.json` (atomically, with the
/// scope), and it removes it last. A reset cut short between its steps (a SIGKILL at the unlink of
/// `tokens.json`, a power cut, a write that fails) leaves the mark, and the next start (`StateDirectory.open`,
/// before any state is read), or the next offline `reset` or `deregister`, finishes the wipe. Every step can be
/// done again: the deregistration is queued from `tokens.json` while it still holds the pairing (the newest
/// refresh token: a rotation is saved there first), and a file already gone is not an error. So whatever prefix
/// of the reset was done, the device ends up wiped with DRS's deregistration queued, never half way.
enum ResetWipe {
    /// What goes: everything (a factory reset, an owner change), or only the pairing and what belongs to the
    /// account (`replenish-agent deregister`: tokens, queued presses, subscriptions and open orders; the order
    /// history stays for the owner to read).
    enum Scope: String, Sendable, Codable {
        case everything, pairing
    }

    /// What `wipe.json` holds.
    struct Mark: StateFormat {
        static let formatVersion = 1
        var version = formatVersion
        var scope: Scope
        /// The tag of the pairing being wiped (nil: unpaired, untagged, or not known to the writer). A token file
        /// with another tag at the next start is a pairing made after the wipe stopped: it is kept.
        var pairingId: String? = nil
    }

    static func markPath(stateDirectory: String) -> String { POSIX.join(stateDirectory, "wipe.json") }

    /// Writes the mark, durably: from here on the wipe is finished, at the latest at the next start. On the
    /// calling thread: a command without the daemon, or the daemon's reset on the disk lane.
    static func begin(
        _ scope: Scope, pairingId: String? = nil, stateDirectory: String, on lane: borrowing DiskLane.Context
    ) throws(AgentError) {
        try StateStore<Mark>.resetMark(stateDirectory: stateDirectory).saveNow(
            Mark(scope: scope, pairingId: pairingId), on: lane)
    }

    /// Removes the mark, durably: the wipe is done.
    static func end(stateDirectory: String, on lane: borrowing DiskLane.Context) throws(AgentError) {
        try StateStore<Mark>.resetMark(stateDirectory: stateDirectory).shredNow(on: lane, includingADirectory: true)
    }

    /// Finishes the wipe of a reset that was cut short (the caller holds the state directory's lock, and no
    /// state is loaded yet); `report` is told what was done. Nothing happens without the mark.
    static func finishInterrupted(
        stateDirectory: String, on lane: borrowing DiskLane.Context, report: (String) -> Void
    ) throws(AgentError) {
        let scope: Scope
        switch try StateStore<Mark>.resetMark(stateDirectory: stateDirectory).read(on: lane) {
        case .missing: return
        case .read(let mark):
            scope = mark.scope
            // The daemon's wipe failed (an I/O error) and the customer paired again before this start: the new
            // pairing is not the one the reset was for. Its presses carry its tag; the old ones are parked by
            // theirs. Only the mark goes.
            if let wiped = mark.pairingId, let now = try? FileTokenStore.peek(stateDirectory: stateDirectory, on: lane),
                let current = now.pairingId, current != wiped
            {
                try end(stateDirectory: stateDirectory, on: lane)
                report("state directory: a reset was cut short before a new pairing; the new pairing is kept")
                return
            }
        // Only a reset writes the mark: one that cannot be read still says a wipe was under way.
        case .unusable: scope = .everything
        }
        let old = try wipeFiles(scope, stateDirectory: stateDirectory, on: lane, report: report)
        try end(stateDirectory: stateDirectory, on: lane)
        report(
            "state directory: a \(scope == .everything ? "reset" : "deregistration") was cut short; its wipe is finished"
                + (old != nil ? " and the DRS deregistration queued" : ""))
    }

    /// The wipe's steps on the files, in the reset's order: the deregistration queued from `tokens.json` when it
    /// still holds a pairing (returned), then the tokens, the queued presses and the status (everything) or the
    /// account's part of it (pairing) go. A token file that cannot be read is moved aside by its loader, reported,
    /// and that copy goes as well.
    @discardableResult
    static func wipeFiles(
        _ scope: Scope, stateDirectory: String, on lane: borrowing DiskLane.Context, report: (String) -> Void
    ) throws(AgentError) -> TokenSet? {
        let store = FileTokenStore(stateDirectory: stateDirectory)
        var old: TokenSet?
        do { old = try store.load(on: lane) } catch {
            // Any other failure leaves the file, and the wipe stops rather than lose the token DRS needs.
            guard try POSIX.linkStatus(store.path) == nil else { throw error }
            report(error.message)
            try FactoryReset<ContinuousClock>.shredMovedAside(stateDirectory: stateDirectory)
        }
        if let old {
            try StateStore<PendingDeregistration>.deregistration(stateDirectory: stateDirectory).saveNow(
                .init(refreshToken: old.refreshToken, clientId: old.clientId), on: lane)
        }
        try store.file.shredNow(on: lane)
        let outbox = StateStore<Outbox>.outbox(stateDirectory: stateDirectory)
        let subscriptions = StateStore<SubscriptionRecord>.subscriptionRecord(stateDirectory: stateDirectory)
        switch scope {
        case .everything:
            try outbox.shredNow(on: lane)
            try subscriptions.shredNow(on: lane)
        case .pairing:
            // The queued presses go; the order history stays for the owner to read.
            if var orders = try outbox.load(on: lane, onCorrupt: report) {
                orders.adoptLegacyOrders(stateDirectory: stateDirectory, on: lane)
                let before = orders
                orders.forgetAccount(reason: "the pairing was reset", at: POSIX.wallTime())
                if orders != before { try outbox.saveNow(orders, on: lane) }
            }
            if var record = try subscriptions.load(on: lane, onCorrupt: report) {
                let before = record
                record.forgetAccount()
                if record != before { try subscriptions.saveNow(record, on: lane) }
            }
        }
        return old
    }
}

extension StateStore<ResetWipe.Mark> {
    /// `wipe.json` of the state directory; its one owner is `ResetWipe`, which writes it on the calling thread
    /// (a command without the daemon, or the daemon's reset on the disk lane).
    static func resetMark(stateDirectory: String) -> Self {
        StateStore(path: ResetWipe.markPath(stateDirectory: stateDirectory))
    }
}
