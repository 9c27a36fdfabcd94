/// Reading the board file `agent.json`'s `board` names.
extension AgentConfig {
    /// The board file at `resolved` (the `board` key resolved against the config's folder), or nil with its
    /// problems added: missing, not strict JSON, a key given twice, or a board that does not check.
    static func readBoardFile(_ resolved: String, problems: inout Problems) -> BoardFile? {
        do {
            if let bytes = try POSIX.readFile(resolved) {
                let syntax = JSONSyntax.inspect(bytes)
                if case .fault(let fault) = syntax {
                    problems.add("board", fault.describe(file: resolved))
                } else if case .valid(let duplicates) = syntax, let json = try? JSONValue.parse(bytes) {
                    for key in duplicates { problems.add(resolved, "\(key): \(duplicateKeyProblem)") }
                    let board = BoardFile.parse(json, file: resolved, problems: &problems)
                    return duplicates.isEmpty ? board : nil
                } else {
                    problems.add("board", "\(resolved) is not valid JSON")
                }
            } else {
                problems.add("board", "no board file at \(resolved)\(boardFilesNear(resolved))")
            }
        } catch {
            problems.add("board", error.message)
        }
        return nil
    }

    /// `; board files in /usr/share/replenish-agent/board: raspberry-pi-4b.json, simulated.json`: what a wrong
    /// board path could have meant (the `.json` files of the folder it names), or that the folder is missing.
    static func boardFilesNear(_ path: String) -> String {
        let directory = POSIX.parentDirectory(of: path)
        guard let names = try? POSIX.directoryEntries(directory) else { return "; no folder \(directory)" }
        let boards = names.filter { $0.hasSuffix(".json") }
        if boards.isEmpty { return "; \(directory) has no .json board files" }
        return "; board files in \(directory): \(boards.joined(separator: ", "))"
    }

}
