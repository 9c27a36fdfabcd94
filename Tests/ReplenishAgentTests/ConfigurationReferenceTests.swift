import Foundation
import Testing

@testable import ReplenishAgent

/// docs/configuration.md against the decoder: every key it documents is one the decoder accepts, and every key the
/// decoder accepts is documented. The keys the decoder accepts are those its readers ask for (`Problems.keysRead`),
/// taken from reading the shipped example config and a shipped board file, which hold every object the decoder
/// reads (so every reader asks its keys).
@Suite(.tags(.unit)) struct ConfigurationReferenceTests {
    /// The backticked key paths that start the rows of docs/configuration.md's tables (`buttons[].slot`,
    /// `board:inputs[].name`).
    static func documentedKeys() throws -> Set<String> {
        let text = try String(contentsOfFile: packageRoot() + "/docs/configuration.md", encoding: .utf8)
        var keys: Set<String> = []
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let rest = line.dropFirst(3)
            guard let end = rest.firstIndex(of: "`") else { continue }
            keys.insert(String(rest[..<end]))
        }
        return keys
    }

    /// The keys the decoder asks for, array indices written `[]`, in the two shipped examples (program drs and
    /// program alexa).
    static func keysTheDecoderReads() throws -> Set<String> {
        let directory = temporaryDirectory()
        var keys: Set<String> = []
        for name in ["agent.example.json", "agent.alexa.example.json"] {
            var example = try String(contentsOfFile: packageRoot() + "/config/" + name, encoding: .utf8)
            for board in ["raspberry-pi-4b.json", "generic-gpiod.json"] {
                example = example.replacingOccurrences(
                    of: "/usr/share/replenish-agent/board/" + board, with: packageRoot() + "/board/" + board)
            }
            let path = directory + "/" + name
            try example.write(toFile: path, atomically: true, encoding: .utf8)
            var problems = Problems()
            _ = AgentConfig.parse(path: path, problems: &problems)
            keys.formUnion(
                problems.keysRead.map {
                    $0.replacingOccurrences(of: #"\[[0-9]+\]"#, with: "[]", options: .regularExpression)
                })
        }
        return keys
    }

    @Test func everyDocumentedKeyIsReadAndEveryReadKeyIsDocumented() throws {
        let documented = try Self.documentedKeys()
        let read = try Self.keysTheDecoderReads()
        // The scans see something: both sides hold the keys every config has.
        #expect(
            read.isSuperset(of: [
                "device.serial", "lwa.clientId", "buttons[].slot", "board:inputs[].name", "alexa.cloudURL",
                "buttons[].level.measurement",
            ]))
        #expect(!documented.isEmpty)
        // An object that only holds keys (`device`, `buttons`, `board:inputs`) needs no row of its own.
        let objects = read.filter { key in read.contains { $0.hasPrefix(key + ".") || $0.hasPrefix(key + "[]") } }
        #expect(documented.subtracting(read).sorted() == [], "documented in docs/configuration.md, not read")
        #expect(
            read.subtracting(objects).subtracting(documented).sorted() == [],
            "read by the decoder, not in docs/configuration.md")
    }
}
