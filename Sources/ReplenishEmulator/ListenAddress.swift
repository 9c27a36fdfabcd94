import ArgumentParser

/// A `HOST:PORT` (or `[IPv6]:PORT`) to listen on; port 0 picks a free one.
struct ListenAddress: ExpressibleByArgument, Sendable {
    var host: String
    var port: Int

    init?(argument: String) {
        guard let colon = argument.lastIndex(of: ":") else { return nil }
        var host = String(argument[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, let port = Int(argument[argument.index(after: colon)...]), (0...65535).contains(port)
        else { return nil }
        self.host = host
        self.port = port
    }

    var defaultValueDescription: String { "\(urlHost):\(port)" }

    /// The host as it goes into a URL (IPv6 in brackets).
    var urlHost: String { host.contains(":") ? "[\(host)]" : host }
}
