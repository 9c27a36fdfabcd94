/// Every problem found in a config, one a line, each naming the key path or the file.
struct ConfigError: Error, Sendable {
    var problems: [String]
}
