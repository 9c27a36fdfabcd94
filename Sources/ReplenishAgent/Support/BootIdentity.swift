/// Which boot of the device the agent runs in, as its unit's sandbox lets it know.
///
/// The kernel's boot id (`/proc/sys/kernel/random/boot_id`) is hidden by the unit's `ProcSubset=pid`, so the
/// agent keeps its own mark in the runtime directory (the unit's `RuntimeDirectory=`, a tmpfs that every boot
/// starts empty and that `RuntimeDirectoryPreserve=yes` keeps across the agent's restarts): the first start of
/// a boot writes an id there (the kernel's when it can read it, else a random one) and every later start and
/// every command of that boot reads it. Without a usable runtime directory the kernel's id is used as it is,
/// and where neither can be had the boot is unknown (nil): an unknown boot is never taken for the boot of an
/// earlier mark (`Outbox.waitsForClock`).
enum BootIdentity {
    static let kernelBootIdPath = "/proc/sys/kernel/random/boot_id"
    static let markerName = "boot-id"

    /// This boot's id. `create`: the daemon's start makes the runtime directory (0700) and the mark when they
    /// are missing; commands only read them (`status` run by hand must not make a mark the daemon then
    /// believes). `kernelPath` is the kernel's file (tests point it elsewhere).
    static func current(
        runtimeDirectory: String, create: Bool, kernelPath: String = kernelBootIdPath,
        random: () -> UInt64 = systemRandom, on lane: borrowing DiskLane.Context
    ) -> String? {
        let marker = StateStore<BootMark>.bootMark(runtimeDirectory: runtimeDirectory)
        // A command run from a root shell reads the mark of the agent's user (`StateDirectory.agentUID`).
        let owner = create ? POSIX.effectiveUserID() : StateDirectory.agentUID(runtimeDirectory)
        if case .read(let marked)? = try? marker.read(on: lane, owner: owner) { return marked.id }
        let kernel = read(kernelPath)
        guard create else { return kernel }
        let id = kernel ?? randomId(random)
        do {
            // At the daemon's start, before its loop serves. A tmpfs: nothing to make durable, and a half-written
            // mark cannot outlive the boot; the runtime directory is made (0700) when missing.
            try marker.saveNow(BootMark(id: id), on: lane)
        } catch {
            // No runtime directory to be had: the kernel's id (which a later start reads the same) or none.
            return kernel
        }
        return id
    }

    /// The kernel's id in `path` (whitespace removed), or nil when it cannot be read or is empty or not an id. A
    /// file of `/proc`, which cannot stall (`OffLoop.Medium.memory`).
    static func read(_ path: String) -> String? {
        guard let bytes = try? POSIX.readFile(path, limit: 64, .memory) else { return nil }
        return try? BootMark.decoded(from: bytes).get().id
    }

    /// Whether `text` has an id's form: hex digits and dashes, not empty.
    static func isId(_ text: String) -> Bool { !text.isEmpty && text.allSatisfy { $0.isHexDigit || $0 == "-" } }

    /// 64 bits from the system's CSPRNG.
    static func systemRandom() -> UInt64 {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }

    /// 128 random bits in the kernel's boot-id form (8-4-4-4-12 hex digits).
    static func randomId(_ random: () -> UInt64 = systemRandom) -> String {
        let digits = (0..<2).map { _ in random() }.map { word in
            let hex = String(word, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
        var id = ""
        for (index, digit) in digits.enumerated() {
            if [8, 12, 16, 20].contains(index) { id.append("-") }
            id.append(digit)
        }
        return id
    }
}

/// What the boot's mark (`BootIdentity.markerName` in the runtime directory) holds: one line, the id.
struct BootMark: FileFormat {
    var id: String

    static func decoded(from bytes: [UInt8]) -> Result<BootMark, StateFile.FormatProblem> {
        let text = String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace }
        guard BootIdentity.isId(text) else { return .failure(StateFile.FormatProblem(reason: "holds no boot id")) }
        return .success(BootMark(id: text))
    }

    func encoded(for path: String) throws(AgentError) -> [UInt8] { Array((id + "\n").utf8) }
}

extension StateStore<BootMark> {
    /// The boot's mark in the runtime directory (a tmpfs); its one owner is `BootIdentity`.
    static func bootMark(runtimeDirectory: String) -> Self {
        StateStore(path: POSIX.join(runtimeDirectory, BootIdentity.markerName), medium: .tmpfs, limit: 64)
    }
}

/// The running agent as its "sent, answer unknown" marks name it (`Outbox.Entry.unansweredRun`): its boot
/// (`BootIdentity.current`, nil when it cannot be known) and an id of this run, drawn at random when the daemon
/// starts and recorded in the state directory's lock file (`StateDirectory.lock`), where `status` reads it
/// while that agent runs. A mark with this run's id is of this boot whatever the sandbox hides: an unknown boot
/// is only ever assumed for a mark loaded from disk.
struct AgentRun: Sendable {
    var boot: String?
    var id: String?

    /// Nothing known (a command with no agent running and no boot mark).
    static let unknown = AgentRun(boot: nil, id: nil)
}
