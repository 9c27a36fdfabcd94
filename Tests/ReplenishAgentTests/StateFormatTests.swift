import Foundation
import Testing

@testable import ReplenishAgent

/// Every state-file format version the agent has written, and the next one a newer build may leave behind
/// before a rollback, loaded through the real loaders from the checked-in fixtures.
@Suite(.tags(.unit)) struct StateFormatTests {
    static let fixtures = packageRoot() + "/Tests/ReplenishAgentTests/Fixtures"

    /// A state directory holding a copy of `fixture` as `name` (mode 0600, as the agent writes it).
    func stateDirectory(with fixture: String, as name: String) throws -> String {
        let directory = temporaryDirectory()
        try FileManager.default.copyItem(atPath: Self.fixtures + "/" + fixture, toPath: directory + "/" + name)
        chmod(directory + "/" + name, 0o600)
        return directory
    }

    func names(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    @Test func theRuleIsOneVersionAhead() {
        #expect(TokenSet.readableVersions == 1...TokenSet.formatVersion + 1)
        #expect(Outbox.readableVersions == 1...Outbox.formatVersion + 1)
        #expect(SubscriptionRecord.readableVersions == 1...SubscriptionRecord.formatVersion + 1)
    }

    /// Bumping a format version without adding the fixture it writes fails here.
    @Test func thereIsAFixtureForEveryReadableVersion() throws {
        for (name, current) in [
            ("tokens", TokenSet.formatVersion), ("outbox", Outbox.formatVersion),
            ("status", SubscriptionRecord.formatVersion),
        ] {
            for version in 1...current + 2 {
                #expect(
                    FileManager.default.fileExists(atPath: "\(Self.fixtures)/\(name)-v\(version).json"),
                    "\(name)-v\(version).json")
            }
        }
    }

    @Test func fixtureTokensAreObviouslyFake() throws {
        for name in try names(Self.fixtures) where name.hasPrefix("tokens-") {
            let text = try String(contentsOfFile: Self.fixtures + "/" + name, encoding: .utf8)
            let tokens = try JSONDecoder().decode(TokenSet.self, from: Data(text.utf8))
            #expect(tokens.refreshToken.value.hasPrefix("Atzr|fixture-"), "\(name)")
            #expect(tokens.accessToken.value.hasPrefix("Atza|fixture-"), "\(name)")
        }
    }

    @Test(arguments: [
        ("tokens-v1.json", "Atzr|fixture-refresh-v1", "Atza|fixture-access-v1", 1_800_000_000.5),
        ("tokens-v2.json", "Atzr|fixture-refresh-v2", "Atza|fixture-access-v2", 1_800_003_600),
    ])
    func tokenFilesOfEveryReadableVersionKeepThePairing(
        fixture: String, refresh: String, access: String, expiresAt: Double
    ) async throws {
        let directory = try stateDirectory(with: fixture, as: "tokens.json")
        let store = FileTokenStore(stateDirectory: directory)
        let tokens = try #require(try store.load())
        #expect(tokens.clientId == "amzn1.application-oa2-client.fixture")
        #expect(tokens.refreshToken == Secret(refresh))
        #expect(tokens.accessToken == Secret(access))
        #expect(tokens.accessTokenExpiresAt == expiresAt)
        #expect(tokens.accessTokenLifetime == 3600)
        #expect(tokens.version == TokenSet.formatVersion)
        // Read in place, never moved aside; written back in this build's version.
        #expect(try names(directory) == ["tokens.json"])
        #expect(try FileTokenStore.peek(stateDirectory: directory) == tokens)
        try await store.save(tokens)
        let written = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: store.path)))
        #expect((written as? [String: Any])?["version"] as? Int == TokenSet.formatVersion)
        #expect(try store.load() == tokens)
    }

    @Test func outboxV1KeepsEveryPressAndParking() throws {
        let directory = try stateDirectory(with: "outbox-v1.json", as: "outbox.json")
        var reports: [String] = []
        let outbox = try #require(
            try StateFile.load(Outbox.self, from: directory + "/outbox.json") { reports.append($0) })
        #expect(reports.isEmpty)
        #expect(outbox.version == Outbox.formatVersion)
        #expect(
            outbox.entries == [
                Outbox.Entry(slot: "slot-1", pressedAt: [1_763_790_000.25, 1_763_790_060.5], attempts: 2),
                Outbox.Entry(slot: "slot-2", pressedAt: [1_763_790_100], attempts: 5, parkedReason: "INVALID_SLOT_ID"),
            ])
    }

    @Test func outboxV2FromANewerBuildIsReadAndItsExtraFieldsIgnored() throws {
        let directory = try stateDirectory(with: "outbox-v2.json", as: "outbox.json")
        var reports: [String] = []
        let path = directory + "/outbox.json"
        let outbox = try #require(try StateFile.load(Outbox.self, from: path) { reports.append($0) })
        #expect(reports.isEmpty)
        #expect(try names(directory) == ["outbox.json"])
        #expect(outbox.pending.map(\.slot) == ["slot-1"])
        #expect(outbox.entry(for: "slot-1")?.pressedAt == [1_763_790_200])
        #expect(outbox.entry(for: "slot-1")?.attempts == 1)
        #expect(outbox.parked.map(\.slot) == ["slot-3"])
        #expect(outbox.entry(for: "slot-3")?.parkedReason == "made under an earlier pairing")
        // Written back as this build's version.
        try DiskLane.saveNow(outbox, to: path)
        let written = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
        #expect((written as? [String: Any])?["version"] as? Int == Outbox.formatVersion)
        #expect(try StateFile.load(Outbox.self, from: path) { reports.append($0) } == outbox)
    }

    @Test func statusFilesOfEveryVersionWrittenAndTheNextAreRead() throws {
        for fixture in ["status-v1-first.json", "status-v1.json", "status-v2.json"] {
            let directory = try stateDirectory(with: fixture, as: "status.json")
            var reports: [String] = []
            let record = try #require(
                try StateFile.load(SubscriptionRecord.self, from: directory + "/status.json") { reports.append($0) })
            #expect(reports.isEmpty, "\(fixture)")
            #expect(try names(directory) == ["status.json"], "\(fixture)")
            #expect(record.version == SubscriptionRecord.formatVersion)
            #expect(record.lastDeviceStatusAt == 1_763_790_000, "\(fixture)")
            #expect(record.slots["slot-1"]?.subscribed == true, "\(fixture)")
            // The slots' orders of these files are read once, to move them into outbox.json.
            let read = LegacyOrders.read(stateDirectory: directory, on: .beforeServing())
            let legacy = try #require(read, "\(fixture)")
            #expect(legacy.slots?["slot-1"]?.lastResult == "TEST_ORDER_PLACED", "\(fixture)")
            #expect(legacy.slots?["slot-1"]?.lastResultAt == 1_763_790_100, "\(fixture)")
            switch fixture {
            case "status-v1-first.json":
                #expect(record.lastSubscriptionCheckAt == 1_763_790_001)
                #expect(legacy.slots?["slot-1"]?.lastEventInstanceId == "amzn1.dash.v2.o.fixture-1")
            case "status-v1.json":
                #expect(record.slots["slot-2"] == SubscriptionRecord.Slot(subscribed: false))
            default:
                #expect(legacy.slots?["slot-1"]?.lastEventInstanceId == nil)
            }
        }
    }

    /// Builds before issue 30 kept the token state, the pairing window and the linking code in `status.json`; they
    /// are `ShownStatus` now, in the runtime directory. Such a file is read as before (nothing moved aside, the
    /// slots kept), and its next write leaves those fields out.
    @Test func statusFilesOfEarlierBuildsWithTheShownFieldsAreReadAndWrittenWithoutThem() throws {
        let path = try stateDirectory(with: "status-v1-linking.json", as: "status.json") + "/status.json"
        guard case .read(let record) = try StateFile.read(SubscriptionRecord.self, from: path) else {
            Issue.record("an earlier build's status.json is not read")
            return
        }
        let before = try String(contentsOfFile: path, encoding: .utf8)
        #expect(before.contains("\"linking\"") && before.contains("\"tokenState\""))
        try DiskLane.saveNow(record, to: path)
        let after = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!after.contains("\"linking\"") && !after.contains("\"tokenState\""))
        #expect(try StateFile.load(SubscriptionRecord.self, from: path) { _ in } == record)
    }

    /// Two versions ahead: a format this build must not read. Moved aside with the reason; for tokens the
    /// device is unpaired and keeps working.
    @Test func aVersionThisBuildCannotReadIsMovedAsideWithTheReason() throws {
        for (fixture, name) in [
            ("tokens-v3.json", "tokens.json"), ("outbox-v3.json", "outbox.json"), ("status-v3.json", "status.json"),
        ] {
            let directory = try stateDirectory(with: fixture, as: name)
            let path = directory + "/" + name
            var reports: [String] = []
            switch name {
            case "tokens.json":
                let store = FileTokenStore(stateDirectory: directory)
                #expect(throws: AgentError.self) { try FileTokenStore.peek(stateDirectory: directory) }
                do {
                    _ = try store.load()
                    Issue.record("a version 3 token file must not load")
                } catch { reports.append(error.message) }
                #expect(try store.load() == nil)
            case "outbox.json":
                #expect(try StateFile.load(Outbox.self, from: path) { reports.append($0) } == nil)
            default:
                #expect(try StateFile.load(SubscriptionRecord.self, from: path) { reports.append($0) } == nil)
            }
            #expect(reports.count == 1, "\(name)")
            #expect(reports.first?.contains("\(path) has format version 3, which this build cannot read") == true)
            #expect(reports.first?.contains("moved to \(path).corrupt-") == true)
            let left = try names(directory)
            #expect(left.count == 1 && left[0].hasPrefix(name + ".corrupt-"), "\(left)")
            // Kept whole for inspection.
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: directory + "/" + left[0]))
                    == Data(contentsOf: URL(fileURLWithPath: Self.fixtures + "/" + fixture)))
        }
    }

    @Test func aFileWithoutAVersionOrWithAVersionZeroIsNotRead() throws {
        for text in [#"{"entries":[]}"#, #"{"entries":[],"version":0}"#, #"{"entries":[],"version":"1"}"#, "[]"] {
            #expect(throws: StateFile.FormatProblem.self) {
                try StateFile.decode(Outbox.self, from: Array(text.utf8)).get()
            }
        }
        #expect(try StateFile.decode(Outbox.self, from: Array(#"{"entries":[],"version":1}"#.utf8)).get() == Outbox())
    }

    /// A decoding failure's reason never quotes the file: a token in the wrong place must not reach a log.
    @Test func reasonsNeverQuoteTheFile() throws {
        let text = #"{"version":1,"clientId":"c","refreshToken":"Atzr|fixture-leak","accessToken":5}"#
        let directory = temporaryDirectory()
        try text.write(toFile: directory + "/tokens.json", atomically: false, encoding: .utf8)
        chmod(directory + "/tokens.json", 0o600)
        do {
            _ = try FileTokenStore(stateDirectory: directory).load()
            Issue.record("must not load")
        } catch {
            #expect(!error.message.contains("Atzr|"))
            #expect(error.message.contains("cannot be read as a version 1 file"))
            #expect(error.message.contains("the device must be paired again"))
        }
    }
}
