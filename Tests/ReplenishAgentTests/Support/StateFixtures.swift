import Logging

@testable import ReplenishAgent

/// The tests' fixtures read and write state files by path, through a store made for the one call (the agent's
/// own code names each file's store: `StateStore.outbox`, `.tokens`, …).
extension StateFile {
    static func load<T: StateFormat>(
        _ type: T.Type, from path: String, limit: Int = readLimit, onCorrupt: (String) -> Void
    ) throws(AgentError) -> T? {
        try StateStore<T>(path: path, limit: limit).load(on: .beforeServing(), onCorrupt: onCorrupt)
    }

    static func read<T: StateFormat>(
        _ type: T.Type, from path: String, limit: Int = readLimit, owner: UserID = POSIX.effectiveUserID()
    ) throws(AgentError) -> Reading<T> {
        try StateStore<T>(path: path, limit: limit).read(on: .beforeServing(), owner: owner)
    }
}

extension DiskLane {
    static func saveNow<T: StateFormat>(_ value: T, to path: String) throws(AgentError) {
        try StateStore<T>(path: path).saveNow(value, on: .beforeServing())
    }
}

// The unit tests run no event loop: they take the context a command takes (`DiskLane.Context.beforeServing`)
// through these forwarding faces, so that a test reads as the call it tests. The agent's own code has none.

extension StateStore {
    func read(owner: UserID = POSIX.effectiveUserID()) throws(AgentError) -> StateFile.Reading<Value> {
        try read(on: .beforeServing(), owner: owner)
    }
    func readBytes(owner: UserID = POSIX.effectiveUserID()) throws(AgentError) -> StateFile.Reading<[UInt8]> {
        try readBytes(on: .beforeServing(), owner: owner)
    }
    func load(onCorrupt: (String) -> Void) throws(AgentError) -> Value? {
        try load(on: .beforeServing(), onCorrupt: onCorrupt)
    }
    func saveNow(_ value: Value) throws(AgentError) { try saveNow(value, on: .beforeServing()) }
    func shredNow(includingADirectory: Bool = false) throws(AgentError) {
        try shredNow(on: .beforeServing(), includingADirectory: includingADirectory)
    }
    func moveAside() throws(AgentError) -> String { try moveAside(on: .beforeServing()) }
}

extension StateFile {
    static func readBytes(_ path: String, limit: Int, owner: UserID = POSIX.effectiveUserID()) throws(AgentError)
        -> Reading<[UInt8]>
    {
        try readBytes(path, limit: limit, owner: owner, on: .beforeServing())
    }
    static func moveAside(_ path: String) throws(AgentError) -> String { try moveAside(path, on: .beforeServing()) }
}

extension FileTokenStore {
    func load() throws(AgentError) -> TokenSet? { try load(on: .beforeServing()) }
    static func read(_ file: StateStore<TokenSet>, owner: UserID = POSIX.effectiveUserID()) throws(AgentError)
        -> StateFile.Reading<TokenSet>
    {
        try read(file, owner: owner, on: .beforeServing())
    }
    static func peek(stateDirectory: String) throws(AgentError) -> TokenSet? {
        try peek(stateDirectory: stateDirectory, on: .beforeServing())
    }
}

extension TokenManager {
    init(
        store: any TokenStore, lwa: LWAClient, clock: C, wallTime: @escaping @Sendable () -> Double,
        clockTrusted: Bool = true, random: RandomSource = .system, identity: DeviceIdentity? = nil,
        logger: Logger
    ) throws(AgentError) {
        try self.init(
            store: store, lwa: lwa, clock: clock, wallTime: wallTime, clockTrusted: clockTrusted, random: random,
            identity: identity, logger: logger, loadingOn: .beforeServing())
    }
}

extension OrderBook {
    init(
        stateDirectory: String, run: AgentRun, wallTime: @escaping @Sendable () -> Double,
        clockSynchronized: @escaping @Sendable () -> Bool = { WallClock.isSynchronized() },
        sinceBoot: @escaping @Sendable () -> Double = { WallClock.sinceBoot() }, random: RandomSource = .system,
        logger: Logger
    ) throws(AgentError) {
        try self.init(
            stateDirectory: stateDirectory, run: run, wallTime: wallTime, clockSynchronized: clockSynchronized,
            sinceBoot: sinceBoot, random: random, logger: logger, loadingOn: .beforeServing())
    }
}

extension SubscriptionBook {
    init(store: StateStore<SubscriptionRecord>, onCorrupt: (String) -> Void) throws(AgentError) {
        try self.init(store: store, onCorrupt: onCorrupt, loadingOn: .beforeServing())
    }
    init(stateDirectory: String, onCorrupt: (String) -> Void) throws(AgentError) {
        try self.init(stateDirectory: stateDirectory, onCorrupt: onCorrupt, loadingOn: .beforeServing())
    }
}

extension SupplyReporter {
    init(
        unit: String, sensors: [String: AgentConfig.SupplySensor], store: StateStore<ReportRecord>, cloud: CloudClient,
        clock: C, wallTime: @escaping @Sendable () -> Double?, random: RandomSource = .system, logger: Logger,
        onCorrupt: (String) -> Void
    ) throws(AgentError) {
        try self.init(
            unit: unit, sensors: sensors, store: store, cloud: cloud, clock: clock, wallTime: wallTime, random: random,
            logger: logger, onCorrupt: onCorrupt, loadingOn: .beforeServing())
    }
}

extension StateDirectory {
    static func open(_ path: String, report: (String) -> Void) throws(AgentError) -> StateDirectoryLock {
        try open(path, on: .beforeServing(), report: report)
    }
    static func lock(_ path: String) throws(AgentError) -> StateDirectoryLock { try lock(path, on: .beforeServing()) }
    static func sweep(_ path: String, report: (String) -> Void) throws(AgentError) {
        try sweep(path, on: .beforeServing(), report: report)
    }
}

extension BootIdentity {
    static func current(
        runtimeDirectory: String, create: Bool, kernelPath: String = kernelBootIdPath,
        random: () -> UInt64 = systemRandom
    ) -> String? {
        current(
            runtimeDirectory: runtimeDirectory, create: create, kernelPath: kernelPath, random: random,
            on: .beforeServing())
    }
}

extension ResetWipe {
    static func begin(_ scope: Scope, pairingId: String? = nil, stateDirectory: String) throws(AgentError) {
        try begin(scope, pairingId: pairingId, stateDirectory: stateDirectory, on: .beforeServing())
    }
    static func end(stateDirectory: String) throws(AgentError) {
        try end(stateDirectory: stateDirectory, on: .beforeServing())
    }
    static func finishInterrupted(stateDirectory: String, report: (String) -> Void) throws(AgentError) {
        try finishInterrupted(stateDirectory: stateDirectory, on: .beforeServing(), report: report)
    }
    @discardableResult
    static func wipeFiles(_ scope: Scope, stateDirectory: String, report: (String) -> Void) throws(AgentError)
        -> TokenSet?
    {
        try wipeFiles(scope, stateDirectory: stateDirectory, on: .beforeServing(), report: report)
    }
}

extension FactoryReset {
    static func performOffline(stateDirectory: String) throws(AgentError) -> String {
        try performOffline(stateDirectory: stateDirectory, on: .beforeServing())
    }
}

extension Outbox {
    @discardableResult
    mutating func adoptLegacyOrders(stateDirectory: String, owner: UserID = POSIX.effectiveUserID()) -> Bool {
        adoptLegacyOrders(stateDirectory: stateDirectory, owner: owner, on: .beforeServing())
    }
}
