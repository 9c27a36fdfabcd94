import ArgumentParser
import Testing

@testable import ReplenishAgent

/// The commands' arguments, parsed apart from running them: the shared `--config` option group and the
/// enumerated values (`level`'s level, `gpio-watch --outputs`, `run --log-level`) the parser checks itself.
@Suite(.tags(.unit)) struct CommandParsingTests {
    @Test func everyCommandTakesTheSharedConfigOption() throws {
        #expect(try StatusCommand.parse([]).options.config == "/etc/replenish-agent/agent.json")
        #expect(try StatusCommand.parse(["--config", "/a.json"]).options.config == "/a.json")
        #expect(try RunCommand.parse(["--config", "/a.json"]).options.config == "/a.json")
        #expect(try CheckConfigCommand.parse(["--config", "/a.json"]).options.config == "/a.json")
        #expect(try PressCommand.parse(["button", "--config", "/a.json"]).options.config == "/a.json")
        #expect(try LevelCommand.parse(["tank", "low", "--config", "/a.json"]).options.config == "/a.json")
        #expect(try ResetCommand.parse(["--config", "/a.json"]).options.config == "/a.json")
        #expect(try GPIOWatchCommand.parse(["--config", "/a.json"]).options.config == "/a.json")
    }

    @Test func enumeratedValuesAreParsedOrRefused() throws {
        #expect(try LevelCommand.parse(["tank", "low"]).level == .low)
        #expect(try LevelCommand.parse(["tank", "full"]).level == .full)
        #expect(throws: (any Error).self) { try LevelCommand.parse(["tank", "empty"]) }
        #expect(try GPIOWatchCommand.parse([]).outputs == .on)
        #expect(try GPIOWatchCommand.parse(["--outputs", "off"]).outputs == .off)
        #expect(throws: (any Error).self) { try GPIOWatchCommand.parse(["--outputs", "dim"]) }
        #expect(throws: (any Error).self) { try GPIOWatchCommand.parse(["--seconds", "0"]) }
        #expect(try RunCommand.parse([]).logLevel == .info)
        #expect(try RunCommand.parse(["--log-level", "debug"]).logLevel.level == .debug)
        #expect(throws: (any Error).self) { try RunCommand.parse(["--log-level", "loud"]) }
    }

    @Test func aRefusedValueNamesTheChoices() {
        do {
            _ = try LevelCommand.parse(["tank", "empty"])
            Issue.record("an unknown level was accepted")
        } catch {
            let message = LevelCommand.message(for: error)
            #expect(message.contains("'low'") && message.contains("'full'"), "\(message)")
        }
    }
}
