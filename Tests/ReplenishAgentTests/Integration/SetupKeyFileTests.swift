import Foundation
import Testing

@testable import ReplenishAgent

/// The setup key file's rules (issue 50, item 4): `make-setup-key` writes through a temp file that nobody else
/// can have made first (`O_EXCL`, an unpredictable name), never over an existing key; the key file must be owned
/// by the agent's user, or `check-config` and `run` say so. Run as root (as CI does): the tests hand files to
/// another uid.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct SetupKeyFileTests {
    static let otherUID: uid_t = 65534

    @Test(.enabled(if: geteuid() == 0, "needs root to give a file to another uid"))
    func aTempFileAnotherUserMadeFirstNeverGetsTheKey() async throws {
        let harness = Harness()
        let path = harness.directory + "/setup-key"
        // The name the last release wrote through, made first by another user, readable by them.
        let planted = path + ".tmp-\(getpid())"
        #expect(FileManager.default.createFile(atPath: planted, contents: nil))
        #expect(chown(planted, Self.otherUID, Self.otherUID) == 0 && chmod(planted, 0o644) == 0)

        let command = try MakeSetupKeyCommand.parse([path])
        try await command.run()

        let key = try #require(try POSIX.status(path))
        #expect(key.owner == geteuid(), "the key file is the writer's, not the planted file's owner's")
        #expect(key.octalPermissions == "600")
        #expect(try POSIX.status(planted)?.size == 0, "the planted file was written to")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: harness.directory)
            .filter { $0.hasPrefix("setup-key.") && $0 != "setup-key.tmp-\(getpid())" }
        #expect(leftovers.isEmpty, "\(leftovers)")
        // Never over an existing key.
        let before = try String(contentsOfFile: path, encoding: .utf8)
        let again = try harness.run("replenish-agent", ["make-setup-key", path])
        #expect(again.status == 1 && again.error.contains("exists"), "\(again.error)")
        let kept = try String(contentsOfFile: path, encoding: .utf8) == before
        #expect(kept)
    }

    @Test(.enabled(if: geteuid() == 0, "needs root to give a file to another uid"))
    func aKeyFileNotOwnedByTheAgentsUserIsNamedByCheckConfigAndRun() throws {
        let harness = Harness()
        let config = try harness.writeConfig(emulator: "http://127.0.0.1:1", pairingPort: 1, setupKey: true)
        let keyFile = harness.directory + "/setup-key"
        // The agent's user, as a root shell knows it: the state directory's owner.
        try FileManager.default.createDirectory(
            atPath: harness.directory + "/state", withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700])
        let fine = try harness.run("replenish-agent", ["check-config", "--config", config])
        #expect(fine.status == 0, "\(fine.error)")

        // A mode its owner cannot read: root reads it, the agent's user would not.
        #expect(chmod(keyFile, 0o200) == 0)
        let unreadable = try harness.run("replenish-agent", ["check-config", "--config", config])
        #expect(unreadable.status == 1 && unreadable.error.contains("its owner may not read it (mode 200)"))
        #expect(chmod(keyFile, 0o600) == 0)

        #expect(chown(keyFile, Self.otherUID, Self.otherUID) == 0)
        let check = try harness.run("replenish-agent", ["check-config", "--config", config])
        #expect(check.status == 1)
        #expect(
            check.error.contains("pairing.setupKeyFile: \(keyFile) holds the setup key and is owned by uid 65534"),
            "\(check.error)")
        #expect(check.error.contains("chown replenish \(keyFile)"), "\(check.error)")
        let run = try harness.run("replenish-agent", ["run", "--config", config], timeout: 30)
        #expect(run.status == RunCommand.configurationExitCode)
        #expect(run.error.contains("is owned by uid 65534, not the agent's user"), "\(run.error)")
        // `status` names the key file as the cause too (a paired unit in this state does not start).
        let status = try harness.run("replenish-agent", ["status", "--config", config])
        #expect(status.status != 0 && status.error.contains("pairing.setupKeyFile"), "\(status.error)")
        let leakedKey = (check.error + run.error + status.output + status.error).contains(
            try #require(harness.setupKey).hex)
        #expect(!leakedKey)
    }
}
