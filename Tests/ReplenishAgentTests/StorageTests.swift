import Foundation
import Testing

@testable import ReplenishAgent

@Suite(.tags(.unit)) struct StorageTests {
    let tokens = TokenSet(
        clientId: "client", refreshToken: Secret("Atzr|refresh"), accessToken: Secret("Atza|access"),
        accessTokenExpiresAt: 1_800_000_000, accessTokenLifetime: 3600)

    func mode(_ path: String) -> UInt32 {
        var info = stat()
        stat(path, &info)
        return UInt32(info.st_mode & 0o777)
    }

    @Test func tokenStoreRoundTripsWithMode0600EvenUnderALaxUmask() async throws {
        let directory = temporaryDirectory()
        let old = umask(0)
        defer { umask(old) }
        let store = FileTokenStore(stateDirectory: directory)
        #expect(try store.load() == nil)
        try await store.save(tokens)
        #expect(mode(store.path) == 0o600)
        #expect(try store.load() == tokens)
        var rotated = tokens
        rotated.refreshToken = Secret("Atzr|rotated")
        try await store.save(rotated)
        #expect(try store.load() == rotated)
        #expect(mode(store.path) == 0o600)
        // No temp file is left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["tokens.json"])
    }

    @Test func aTornTempFileNeverReplacesTheTokens() async throws {
        let directory = temporaryDirectory()
        let store = FileTokenStore(stateDirectory: directory)
        try await store.save(tokens)
        // A crash mid-write leaves at most a temp file: the real file is untouched.
        try "{\"version\":1,\"clientId\":\"cli".write(
            toFile: store.path + ".tmp-99999", atomically: false, encoding: .utf8)
        #expect(try store.load() == tokens)
    }

    @Test func aCorruptTokenFileIsMovedAsideNotDeleted() throws {
        let directory = temporaryDirectory()
        let store = FileTokenStore(stateDirectory: directory)
        try "{\"version\":1,\"clientId\":\"cli".write(toFile: store.path, atomically: false, encoding: .utf8)
        #expect(throws: AgentError.self) { try store.load() }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(names.count == 1)
        #expect(names.first?.hasPrefix("tokens.json.corrupt-") == true)
        #expect(try store.load() == nil)
    }

    @Test func wipeRemovesTheTokens() async throws {
        let store = FileTokenStore(stateDirectory: temporaryDirectory())
        try await store.save(tokens)
        try await store.wipe()
        #expect(try store.load() == nil)
        try await store.wipe()  // twice is fine
    }

    @Test func stateDirectoryIsCreated0700AndLaxModesAreProblems() throws {
        let parent = temporaryDirectory()
        let state = parent + "/nested/state"
        let old = umask(0)
        defer { umask(old) }
        try StateDirectory.prepare(state)
        #expect(mode(state) == 0o700)
        #expect(try StateDirectory.problems(state) == [])
        chmod(state, 0o750)
        #expect(try StateDirectory.problems(state).count == 1)
        #expect(throws: AgentError.self) { try StateDirectory.prepare(state) }
        chmod(state, 0o700)
        try "x".write(toFile: state + "/loose", atomically: false, encoding: .utf8)
        chmod(state + "/loose", 0o644)
        #expect(try StateDirectory.problems(state) == ["stateDirectory: \(state)/loose has mode 644; it must be 600"])
        // A control socket left by an agent killed between bind and chmod (mode 777 here, umask 0) does not
        // stop the next start: sockets are bound anew at each start and hold no secret.
        unlink(state + "/loose")
        let fd = socket(AF_UNIX, streamSocket, 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in (state + "/control.sock").utf8.enumerated() where index < raw.count - 1 {
                raw[index] = byte
            }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0)
        #expect(mode(state + "/control.sock") & 0o077 != 0)
        #expect(try StateDirectory.problems(state) == [])
    }

    @Test func outboxStateFileSurvivesAndCorruptionIsReported() throws {
        let directory = temporaryDirectory()
        let path = directory + "/outbox.json"
        var outbox = Outbox()
        _ = outbox.accept(slot: "a", at: 1)
        try DiskLane.saveNow(outbox, to: path)
        var reports: [String] = []
        #expect(try StateFile.load(Outbox.self, from: path) { reports.append($0) } == outbox)
        try "garbage".write(toFile: path, atomically: false, encoding: .utf8)
        #expect(try StateFile.load(Outbox.self, from: path) { reports.append($0) } == nil)
        #expect(reports.count == 1 && reports[0].contains("moved to"))
    }

    /// Two entries for one slot (a hand edit; the agent writes one): before they were merged, a park acted on
    /// the first and left the second pending, which was sent again at once after every answer.
    @Test func twoEntriesForOneSlotInAnOutboxBecomeOneLosingNoPress() throws {
        let path = temporaryDirectory() + "/outbox.json"
        try #"""
        {"version":1,"entries":[
          {"slot":"a","pressedAt":[3],"attempts":2,"parkedReason":"INVALID_SLOT_ID"},
          {"slot":"b","pressedAt":[5]},
          {"slot":"a","pressedAt":[1,4],"attempts":1,"unansweredSince":2,"unansweredBoot":"boot-1"},
          {"slot":"a","pressedAt":[6],"unansweredSince":7}
        ]}
        """#.write(toFile: path, atomically: false, encoding: .utf8)
        var outbox = try #require(try StateFile.load(Outbox.self, from: path) { _ in })
        #expect(outbox.entries.map(\.slot) == ["a", "b"])
        let merged = try #require(outbox.entry(for: "a"))
        // The press after the refusal is still to send; every press time is kept; the earliest unknown call too.
        #expect(!merged.isParked && merged.pressedAt == [1, 3, 4, 6] && merged.attempts == 2)
        #expect(merged.unansweredSince == 2 && merged.unansweredBoot == "boot-1")
        outbox.park(slot: "a", reason: "not subscribed")
        #expect(outbox.pending.map(\.slot) == ["b"], "a parked slot has nothing left to send")
        // Written back with one entry per slot.
        try DiskLane.saveNow(outbox, to: path)
        #expect(try StateFile.load(Outbox.self, from: path) { _ in } == outbox)
    }

    @Test func outOfRangeNumbersInStateFilesKeepThePressAndThePairing() throws {
        let directory = temporaryDirectory()
        // Valid JSON that a damaged or hand-edited file could hold: an attempt count at Int.max must not
        // overflow when the next attempt is counted.
        let outboxPath = directory + "/outbox.json"
        try #"{"version":1,"entries":[{"slot":"a","pressedAt":[1],"attempts":9223372036854775807}]}"#
            .write(toFile: outboxPath, atomically: false, encoding: .utf8)
        var outbox = try #require(try StateFile.load(Outbox.self, from: outboxPath) { _ in })
        #expect(outbox.pending.map(\.slot) == ["a"])
        #expect(outbox.entry(for: "a")?.attempts == Outbox.maximumAttempts)
        outbox.recordAttempt(slot: "a")
        #expect(outbox.entry(for: "a")?.attempts == Outbox.maximumAttempts)
        try #"{"version":1,"entries":[{"slot":"b","pressedAt":[1],"attempts":1e19}]}"#
            .write(toFile: outboxPath, atomically: false, encoding: .utf8)
        let huge = try #require(try StateFile.load(Outbox.self, from: outboxPath) { _ in })
        #expect(huge.entry(for: "b")?.attempts == Outbox.maximumAttempts)

        // An absurd expiry keeps the refresh token (the pairing) and makes the access token count as expired.
        let store = FileTokenStore(stateDirectory: directory)
        for (expiresAt, lifetime) in [
            ("1e300", "3600"), ("-1e300", "3600"), ("1800000000", "0"), ("1800000000", "1e300"),
        ] {
            try
                #"{"version":1,"clientId":"client","refreshToken":"Atzr|refresh","accessToken":"Atza|access","accessTokenExpiresAt":\#(expiresAt),"accessTokenLifetime":\#(lifetime)}"#
                .write(toFile: store.path, atomically: false, encoding: .utf8)
            let loaded = try #require(try store.load())
            #expect(loaded.refreshToken == tokens.refreshToken)
            #expect(loaded.accessTokenExpiresAt == 0 && loaded.accessTokenLifetime == 3600)
            #expect(try FileTokenStore.peek(stateDirectory: directory)?.accessTokenExpiresAt == 0)
        }
        #expect(ISO8601.format(1e300) == "invalid time")
        #expect(ISO8601.format(1_450_692_000) == "2015-12-21T10:00:00Z")
    }

    // MARK: a reset's removal of moved-aside copies and state files

    @Test func aHardLinkedMovedAsideCopyIsUnlinkedWithoutZeroingItsOtherName() throws {
        let directory = temporaryDirectory()
        let outside = temporaryDirectory() + "/precious"
        try "keep me".write(toFile: outside, atomically: false, encoding: .utf8)
        try FileManager.default.linkItem(atPath: outside, toPath: directory + "/tokens.json.corrupt-1")
        try FileManager.default.createSymbolicLink(
            atPath: directory + "/outbox.json.corrupt-2", withDestinationPath: outside)

        try FactoryReset<ManualClock>.shredMovedAside(stateDirectory: directory)

        #expect(try POSIX.directoryEntries(directory) == [])
        #expect(try String(contentsOfFile: outside, encoding: .utf8) == "keep me")
    }

    @Test func aHardLinkedStateFileIsUnlinkedWithoutZeroingItsOtherName() async throws {
        let directory = temporaryDirectory()
        let outside = temporaryDirectory() + "/precious"
        try await FileTokenStore(stateDirectory: POSIX.parentDirectory(of: outside)).save(
            TokenSet(
                clientId: "client", refreshToken: Secret("Atzr|r"), accessToken: Secret("Atza|a"),
                accessTokenExpiresAt: 1_800_000_000, accessTokenLifetime: 3600))
        try FileManager.default.moveItem(atPath: POSIX.parentDirectory(of: outside) + "/tokens.json", toPath: outside)
        let content = try String(contentsOfFile: outside, encoding: .utf8)
        try FileManager.default.linkItem(atPath: outside, toPath: directory + "/tokens.json")

        _ = try FactoryReset<ManualClock>.performOffline(stateDirectory: directory)

        #expect(!FileManager.default.fileExists(atPath: directory + "/tokens.json"))
        #expect(try String(contentsOfFile: outside, encoding: .utf8) == content)
    }

    /// A moved-aside directory nested deeper than `PATH_MAX` (4096 bytes) below the state directory: built by
    /// moving its top under a new directory again and again, so no path the test uses is long.
    @Test func aMovedAsideDirectoryNestedPastPathMaxIsRemovedAndTheResetGoesThrough() throws {
        let directory = temporaryDirectory()
        let work = temporaryDirectory()
        let top = work + "/top"
        let next = work + "/next"
        let files = FileManager.default
        try files.createDirectory(atPath: top, withIntermediateDirectories: false)
        try "secret".write(toFile: top + "/tokens.json", atomically: false, encoding: .utf8)
        let name = String(repeating: "d", count: 200)
        for _ in 0..<30 {
            try files.createDirectory(atPath: next, withIntermediateDirectories: false)
            try files.moveItem(atPath: top, toPath: next + "/" + name)
            try files.moveItem(atPath: next, toPath: top)
        }
        try files.moveItem(atPath: top, toPath: directory + "/tokens.json.corrupt-1")
        try "{}".write(toFile: directory + "/status.json.corrupt-2", atomically: false, encoding: .utf8)

        let answer = try FactoryReset<ManualClock>.performOffline(stateDirectory: directory)

        #expect(answer.hasPrefix("reset:"))
        #expect(try POSIX.directoryEntries(directory) == [])
    }
}
