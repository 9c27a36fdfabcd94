import ArgumentParser
import FoundationEssentials

/// The option of the commands that print a report (`status`, `orders`): `--json`, one JSON object with its keys
/// sorted, for scripts, instead of the lines for people.
struct ReportFormat: ParsableArguments {
    @Flag(name: .long, help: "Print one JSON object.")
    var json = false

    /// With `--json`: prints `report` as one JSON object and returns true. Without: prints nothing, false.
    func printedAsJSON(_ report: some Encodable) throws -> Bool {
        guard json else { return false }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        Output.line(String(decoding: try encoder.encode(report), as: UTF8.self))
        return true
    }
}
