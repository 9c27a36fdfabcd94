/// How the daemon runs the delivery loop beside the other parts: it follows the token events, and answers the
/// watchdog's health probe.
extension DeliveryLoop: TokenFollower {
    /// New tokens (a pairing, a refresh) let the entries that waited for them go at once: only `fresh` tokens
    /// and a pairing say so (the token events it is subscribed to, `TokenEvent.letsOrdersGo`).
    nonisolated func follow(tokens: AsyncStream<TokenEvent>) async {
        for await event in tokens where event.letsOrdersGo { await poke() }
    }
}

extension DeliveryLoop {
    /// True: the actor runs jobs (the watchdog's health probe).
    func answers() -> Bool { true }
}
