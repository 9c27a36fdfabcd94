/// The owner's commands as the running daemon carries them out: those that come over the control socket
/// (`replenish-agent reset`, `deregister`, `cancel-test-orders`) and the button's confirmed factory reset.
struct OwnerCommands<C: Clock>: Sendable where C.Duration == Duration {
    let reset: FactoryReset<C>
    let testOrders: TestOrderCancellation<C>

    func perform(_ command: ControlServer.OwnerCommand) async -> Result<String, AgentError> {
        switch command {
        case .reset:
            await reset.perform(reason: "factory reset requested with replenish-agent reset")
        case .deregister:
            await reset.perform(reason: "deregistration requested with replenish-agent deregister", scope: .pairing)
        case .cancelTestOrders(let slot):
            await testOrders.perform(slot: slot)
        }
    }

    /// The button's gesture: a long press, confirmed by a second one within 30 s.
    func resetConfirmedWithTheButton() async -> Result<String, AgentError> {
        await reset.perform(reason: "factory reset confirmed with the button")
    }
}
