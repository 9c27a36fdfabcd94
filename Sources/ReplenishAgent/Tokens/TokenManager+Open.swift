import Logging

extension TokenManager {
    /// The token manager over the token file at start. A corrupt token file is moved aside and reported, and
    /// the agent starts unpaired rather than not at all.
    static func open(
        stateDirectory: String, lwa: LWAClient, clock: C, wallTime: @escaping @Sendable () -> Double,
        clockTrusted: Bool, identity: DeviceIdentity? = nil, logger: Logger, loadingOn lane: borrowing DiskLane.Context
    ) throws(AgentError) -> TokenManager<C> {
        let store = FileTokenStore(stateDirectory: stateDirectory)
        do {
            return try TokenManager(
                store: store, lwa: lwa, clock: clock, wallTime: wallTime, clockTrusted: clockTrusted,
                identity: identity, logger: logger, loadingOn: lane)
        } catch {
            guard error.code == .storage, try store.load(on: lane) == nil else { throw error }
            logger.error("\(error.message)")
            return try TokenManager(
                store: store, lwa: lwa, clock: clock, wallTime: wallTime, clockTrusted: clockTrusted,
                identity: identity, logger: logger, loadingOn: lane)
        }
    }
}
