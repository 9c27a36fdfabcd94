import Testing

@testable import ReplenishAgent

/// A state file's blocking work needs a `DiskLane.Context`, which the compiler keeps from the event loop: the
/// lane hands one, borrowed, to each work it runs. The one other source, `DiskLane.Context.beforeServing`, is
/// for what runs with no event loop serving; these scans keep it, and the daemon's lane itself, in the few
/// files that are that: the commands and the daemons' assemblies.
@Suite(.tags(.unit)) struct LaneContextTests {
    /// Where `beforeServing()` may be called: the commands (no daemon runs their process's loop) and the two
    /// daemons' assemblies (their start, before the loop serves).
    static func mayMakeAContext(_ path: String) -> Bool {
        path.hasPrefix("Commands/") || path == "Daemon/Agent.swift" || path == "Alexa/AlexaAgent.swift"
    }

    /// Where the daemon's lane may be named: its definition, the stores' default, and the assemblies that hand it
    /// to the parts.
    static func mayNameTheDaemonsLane(_ path: String) -> Bool {
        ["Support/DiskLane.swift", "Support/StateStore.swift", "Daemon/Agent.swift", "Alexa/AlexaAgent.swift"]
            .contains(path)
    }

    /// The lines of `files` that break the two rules, as `path:line: text`.
    static func violations(_ files: [BoundaryTests.SourceFile]) -> [String] {
        var found: [String] = []
        for file in files {
            for (index, line) in file.lines.enumerated() {
                let code = BoundaryTests.code(line)
                let makes = code.contains("beforeServing()") && !code.contains("static func beforeServing")
                let names = code.contains("DiskLane.shared") || code.contains("disk: .shared")
                if makes && !mayMakeAContext(file.path) || names && !mayNameTheDaemonsLane(file.path) {
                    found.append("\(file.path):\(index + 1): \(line)")
                }
            }
        }
        return found
    }

    @Test func onlyTheCommandsAndTheAssembliesMakeAContextOrNameTheDaemonsLane() throws {
        let files = try BoundaryTests.agentSources()
        #expect(files.count > 100, "the scan read the agent's sources")
        #expect(Self.violations(files) == [])
        // The rules are used: each is met somewhere, so a scan that read nothing would not pass by default.
        #expect(
            files.contains { $0.lines.contains { $0.contains("beforeServing()") } && Self.mayMakeAContext($0.path) })
    }

    @Test func theScanFindsAContextMadeOrTheLaneNamedInAPart() {
        let planted = [
            BoundaryTests.SourceFile("Orders/Orders.swift", ["let lane = DiskLane.Context.beforeServing()"]),
            BoundaryTests.SourceFile("GPIO/ControlServer.swift", ["try await DiskLane.shared.run { _ in }"]),
            BoundaryTests.SourceFile("Commands/StatusCommand.swift", ["let lane = DiskLane.Context.beforeServing()"]),
            BoundaryTests.SourceFile("Orders/Outbox.swift", ["// beforeServing() in a comment is no call"]),
        ]
        #expect(
            Self.violations(planted) == [
                "Orders/Orders.swift:1: let lane = DiskLane.Context.beforeServing()",
                "GPIO/ControlServer.swift:1: try await DiskLane.shared.run { _ in }",
            ])
    }
}
