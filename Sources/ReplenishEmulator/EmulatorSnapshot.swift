import Foundation

/// What `serve --state-file` keeps on disk so that the emulated LWA and DRS outlive a restart of the emulator
/// (or a power cut of the VM it runs in, which is what the VM boot test does to the device): devices, codes,
/// tokens, orders, subscriptions and the replenish event log. Counters (`/admin/stats`), queued faults and the
/// fault rate start afresh; the configuration comes from the command line each time.
struct EmulatorSnapshot: Codable {
    var devices: [String: DeviceIdentity]
    var codes: [String: AuthorizationCode]
    /// Absent in snapshots written before code-based linking.
    var codePairs: [String: CodePairRecord]?
    var accessTokens: [String: AccessTokenRecord]
    var refreshTokens: [String: RefreshTokenRecord]
    var orders: [String: PlacedOrder]
    var ordersInProgress: [String: String]
    var subscribed: [String: Bool]
    var events: [ReplenishEvent]
    var lastSeq: Int
    /// The maker's cloud of program alexa; absent in snapshots written before it.
    var cloudUnits: [String: CloudUnit]?

    init(of state: EmulatorState) {
        devices = state.devices
        codes = state.codes
        codePairs = state.codePairs
        accessTokens = state.accessTokens
        refreshTokens = state.refreshTokens
        orders = state.orders
        ordersInProgress = state.ordersInProgress
        subscribed = state.subscribed
        events = Array(state.events.kept)
        lastSeq = state.events.lastSeq
        cloudUnits = state.cloudUnits
    }

    /// Puts the snapshot's contents into `state` (slots the configuration no longer has stay unknown).
    func restore(into state: inout EmulatorState) {
        state.devices = devices
        state.codes = codes
        state.codePairs = codePairs ?? [:]
        state.accessTokens = accessTokens
        state.refreshTokens = refreshTokens
        state.orders = orders
        state.ordersInProgress = ordersInProgress
        for (slot, value) in subscribed where state.subscribed[slot] != nil { state.subscribed[slot] = value }
        state.events = ReplenishEventLog(restoring: events, lastSeq: lastSeq)
        state.cloudUnits = cloudUnits ?? [:]
    }

    /// Reads a snapshot; nil when the file does not exist.
    static func load(from path: String) throws -> EmulatorSnapshot? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return try JSONDecoder().decode(EmulatorSnapshot.self, from: data)
    }

    /// Writes the snapshot durably: a temporary file beside `path`, fsync, rename over `path`, fsync of the
    /// folder. Once this returns, a power cut keeps it.
    func save(to path: String) throws {
        let data = try JSONEncoder().encode(self)
        let temporary = "\(path).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SnapshotError("cannot open \(temporary): \(String(cString: strerror(errno)))") }
        let written = data.withUnsafeBytes { buffer -> Bool in
            var offset = 0
            while offset < buffer.count {
                let count = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if count < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += count
            }
            return true
        }
        let synced = fsync(fd) == 0
        close(fd)
        guard written, synced, rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw SnapshotError("cannot write \(path): \(reason)")
        }
        let folder = (path as NSString).deletingLastPathComponent
        let folderFD = open(folder.isEmpty ? "." : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folderFD >= 0 {
            fsync(folderFD)
            close(folderFD)
        }
    }
}

struct SnapshotError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
