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
    let orders: OrderService<C>
    let status: StatusBook
    let deregistration: DeregistrationQueue<C>
    let logger: Logger
    /// How the device pairs again, for the answer (the pairing window, or code-based linking).
    var pairingAgain = "pairing window open"
    /// Runs once the reset's local part is over, done or failed (not when the directory refused a write up
    /// front): the pairing window's state or the code being shown goes back into `status.json`, which the reset
    /// wiped or forgot the account in.
    var afterWipe: @Sendable () async -> Void = {}

    /// What goes: everything (a factory reset, an owner change), or only the pairing and what belongs to the
    /// account (`replenish-agent deregister`: tokens, queued presses, subscriptions and open orders; the order
    /// history stays for the owner to read).
    enum Scope: Sendable {
        case everything, pairing
    }

    /// Carries the reset out in the running daemon: all of it or nothing. The local part is shown possible
    /// first (the state directory takes a write, moved-aside copies go), before DRS hears anything; then the
    /// DRS call is queued durably with the newest refresh token, the pairing and files are wiped, and only then
    /// is DRS asked (once now, then retried by the queue until it answers).
    /// `tellDRSNow: false` leaves the DRS call to the queue's own loop (at start, before the services run).
    func perform(reason: String, scope: Scope = .everything, tellDRSNow: Bool = true) async
        -> Result<String, AgentError>
    {
        do {
            try POSIX.checkWritable(stateDirectory)
            // Moved-aside copies of a damaged token file may hold a token: they go either way.
            try Self.shredMovedAside(stateDirectory: stateDirectory)
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
            try await orders.wipe()
            switch scope {
            case .everything: try await status.wipe()
            case .pairing: try await status.update { $0.forgetAccount() }
            }
        } catch {
            await afterWipe()
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
            return .success("reset: \(deregistered); tokens, queued presses and status wiped; \(pairingAgain)")
        case .pairing:
            logger.notice("deregistered", metadata: ["reset.reason": "\(reason)"])
            return .success("deregister: \(deregistered); tokens and queued presses wiped; \(pairingAgain)")
        }
    }

    /// The reset while no daemon runs (the caller holds the state directory's lock): the deregistration is
    /// queued for the next start, and the files go. Nothing is changed unless the directory takes writes.
    static func performOffline(stateDirectory: String) throws(AgentError) -> String {
        try POSIX.checkWritable(stateDirectory)
        try shredMovedAside(stateDirectory: stateDirectory)
        var queued = false
        if let old = try FileTokenStore(stateDirectory: stateDirectory).load() {
            try DeregistrationQueue<ContinuousClock>.write(
                .init(refreshToken: old.refreshToken, clientId: old.clientId), stateDirectory: stateDirectory)
            queued = true
        }
        for name in ["tokens.json", "outbox.json", "status.json"] {
            try POSIX.shred(POSIX.join(stateDirectory, name))
        }
        return queued
            ? "reset: tokens, queued presses and status wiped; the agent deregisters from DRS when it next runs"
            : "reset: tokens, queued presses and status wiped (the device was not paired)"
    }

    /// Every moved-aside copy (`*.corrupt-*`), a directory that once stood where a state file belongs too.
    static func shredMovedAside(stateDirectory: String) throws(AgentError) {
        for name in try POSIX.directoryEntries(stateDirectory) where StateDirectory.isMovedAside(name) {
            try POSIX.shredEntry(POSIX.join(stateDirectory, name))
        }
    }
}
