/// The LED follows the token lifecycle, the outbox, the pairing window, code-based linking and the presses'
/// signals through their streams: nothing else drives it.
extension Lights {
    /// The facts known before the streams say anything (the state files as loaded).
    func start(paired: Bool, outbox: Outbox) {
        update { facts in
            facts.paired = paired
            facts.pendingOrders = outbox.pending.count
            facts.parkedOrders = outbox.parked.count
        }
    }

    /// Applies every event until the streams end or the task is cancelled.
    nonisolated func follow(
        tokens: AsyncStream<TokenEvent>, orders: AsyncStream<OrderUpdate>,
        window: AsyncStream<PairingWindowKeeper<C>.State>, linking: AsyncStream<LinkingCode?>,
        presses: AsyncStream<PressMeaning.Signal>
    ) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await case .changed(let state) in tokens {
                    await self.update { Self.apply(state, to: &$0) }
                }
            }
            group.addTask {
                for await update in orders { await self.apply(update) }
            }
            group.addTask {
                for await state in window { await self.update { $0.pairingWindowOpen = state.open } }
            }
            group.addTask {
                for await shown in linking { await self.update { $0.codeWaiting = shown != nil } }
            }
            group.addTask {
                for await signal in presses { await self.show(signal) }
            }
        }
    }

    private func show(_ signal: PressMeaning.Signal) {
        switch signal {
        case .acknowledged: acknowledge()
        case .alreadyOrdered: alreadyOrdered()
        case .repairingArmed(let armed): update { $0.repairingArmed = armed }
        }
    }

    static func apply(_ state: TokenState, to facts: inout LEDPattern.Facts) {
        switch state {
        case .fresh, .refreshing:
            facts.paired = true
            facts.tokenFault = false
        case .retryWait:
            facts.paired = true
            facts.tokenFault = true
        case .unpaired, .needsPairing:
            facts.paired = false
            facts.tokenFault = false
        }
    }

    private func apply(_ update: OrderUpdate) {
        self.update { facts in
            facts.pendingOrders = update.pending
            facts.parkedOrders = update.parked
            switch update.event {
            case .retrying(_, let network): facts.lastAttemptFailedForNetwork = network
            case .acknowledged: facts.lastAttemptFailedForNetwork = false
            default: break
            }
        }
        if case .acknowledged = update.event { orderPlaced() }
    }
}

extension Lights {
    /// The LED as the daemon runs it: follows the streams until the group stops.
    struct Part: DaemonPart {
        let lights: Lights
        let tokens: AsyncStream<TokenEvent>
        let orders: AsyncStream<OrderUpdate>
        let window: AsyncStream<PairingWindowKeeper<C>.State>
        let linking: AsyncStream<LinkingCode?>
        let presses: AsyncStream<PressMeaning.Signal>
        var description: String { "lights" }

        func follow() async {
            await lights.follow(tokens: tokens, orders: orders, window: window, linking: linking, presses: presses)
        }
        func work() async { await lights.run() }
    }
}
