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
    let drs: DRSClient
    let deregistration: DeregistrationQueue<C>
    let logger: Logger
    /// How the device pairs again, for the answer (the pairing window, or code-based linking).
    var pairingAgain = "pairing window open"

    /// What goes: everything (a factory reset, an owner change), or only the pairing and what belongs to the
    /// account (`replenish-agent deregister`: tokens, queued presses, subscriptions and open orders; the order
    /// history stays for the owner to read).
    enum Scope: Sendable {
        case everything, pairing
    }

    /// Carries the reset out in the running daemon.
    func perform(reason: String, scope: Scope = .everything) async -> Result<String, AgentError> {
        var deregistered = "the device was not paired"
        if let old = await tokens.currentTokens {
            // Tried at once with the current access token; when DRS cannot be reached, queued with the old
            // refresh token (kept only for that call) and retried until DRS answers.
            do {
                let answer = try await drs.deregister(token: try await tokens.accessToken())
                guard (200..<300).contains(answer.status) else {
                    throw AgentError(.server, "DRS answered \(answer.status)")
                }
                deregistered = "deregistered from DRS"
                logger.info("deregistered from DRS", metadata: ["http.status": "\(answer.status)"])
            } catch {
                let why = (error as? AgentError)?.message ?? "\(error)"
                do {
                    try await deregistration.queue(refreshToken: old.refreshToken, clientId: old.clientId)
                    deregistered = "deregistration queued (\(why))"
                } catch {
                    return .failure(error)
                }
            }
        }
        do {
            try await tokens.unpair(reason: reason)
            try await orders.wipe()
            switch scope {
            case .everything: try await status.wipe()
            case .pairing: try await status.update { $0.forgetAccount() }
            }
            // Moved-aside copies of a damaged token file may hold a token: they go either way.
            try Self.shredMovedAside(stateDirectory: stateDirectory)
        } catch {
            return .failure(error)
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
    /// queued for the next start, and the files go.
    static func performOffline(stateDirectory: String) throws(AgentError) -> String {
        var queued = false
        if let old = try FileTokenStore(stateDirectory: stateDirectory).load() {
            try DeregistrationQueue<ContinuousClock>.write(
                .init(refreshToken: old.refreshToken, clientId: old.clientId), stateDirectory: stateDirectory)
            queued = true
        }
        for name in ["tokens.json", "outbox.json", "status.json"] {
            try POSIX.shred(POSIX.join(stateDirectory, name))
        }
        try shredMovedAside(stateDirectory: stateDirectory)
        return queued
            ? "reset: tokens, queued presses and status wiped; the agent deregisters from DRS when it next runs"
            : "reset: tokens, queued presses and status wiped (the device was not paired)"
    }

    static func shredMovedAside(stateDirectory: String) throws(AgentError) {
        for name in try POSIX.directoryEntries(stateDirectory) where StateDirectory.isMovedAside(name) {
            try POSIX.shred(POSIX.join(stateDirectory, name))
        }
    }
}
