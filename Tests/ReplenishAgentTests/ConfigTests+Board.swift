import Testing

@testable import ReplenishAgent

/// The board file (`board/*.json`, which `agent.json`'s `board` names): that it exists, and its own rules, whose
/// problems name the board file rather than a key of the config.
extension ConfigTests {
    @Test func boardFileMustExist() throws {
        let found = try problems { $0["board"] = "missing.json" }
        #expect(found.contains { $0.hasPrefix("board: no board file at") })
    }

    @Test func boardFileRules() throws {
        let board: [String: Any] = [
            "backend": "gpiod", "inputs": [["name": "button", "bias": "sideways", "wat": 1], ["name": "button"]],
            "outputs": [["name": "led"]],
        ]
        let found = try problems({ _ in }, board: board)
        let file = found.first.map { String($0.prefix { $0 != ":" }) } ?? ""
        #expect(file.hasSuffix("board.json"))
        #expect(found.contains { $0.hasSuffix("chip: is required") })
        #expect(found.contains { $0.hasSuffix("inputs[0].line: is required on a gpiod board") })
        #expect(found.contains { $0.contains("inputs[0].bias: must be") })
        #expect(found.contains { $0.hasSuffix("inputs[0].wat: unknown key") })
        #expect(found.contains { $0.hasSuffix("inputs[1].name: \"button\" is used twice") })
        #expect(found.contains { $0.hasSuffix("outputs[0].line: is required on a gpiod board") })
    }

    /// A board file that is not an object is named as the board file's problem, not the config's.
    @Test func aBoardFileThatIsNotAnObjectNamesTheBoardFile() throws {
        var problems = Problems()
        #expect(BoardFile.parse(.array([]), file: "board.json", problems: &problems) == nil)
        #expect(problems.lines == ["board.json: (top level): must be an object, found an array"])
    }

    /// One chip line is one input or one LED: two inputs, an input and an LED, or two LEDs on a line are refused,
    /// naming both.
    @Test func aLineUsedTwiceIsNamedWithBothUsers() throws {
        let board: [String: Any] = [
            "backend": "gpiod", "chip": "gpiochip0",
            "inputs": [
                ["name": "button", "line": 17], ["name": "button2", "line": 17], ["name": "tank", "line": 5],
            ],
            "outputs": [["name": "led", "line": 5], ["name": "led2", "line": 6], ["name": "led3", "line": 6]],
        ]
        let found = try problems({ _ in }, board: board)
        #expect(
            found.contains { $0.contains("inputs[1].line: line 17 is also used by inputs[0] (button);") }, "\(found)")
        #expect(found.contains { $0.contains("outputs[0].line: line 5 is also used by inputs[2] (tank);") }, "\(found)")
        #expect(
            found.contains { $0.contains("outputs[2].line: line 6 is also used by outputs[1] (led2);") }, "\(found)")
        #expect(found.count == 3, "\(found)")
    }
}
