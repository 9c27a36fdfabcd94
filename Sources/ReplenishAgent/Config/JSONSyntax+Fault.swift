extension JSONSyntax {
    /// The first fault of a document: where it is (1-based line and column, the column counted in characters)
    /// and what it is.
    struct Fault: Error, Equatable, Sendable {
        var line: Int
        var column: Int
        var message: String

        /// `file:line:column: message`, the form compilers use, which editors can jump to.
        func describe(file: String) -> String { "\(file):\(line):\(column): \(message)" }
    }
}
