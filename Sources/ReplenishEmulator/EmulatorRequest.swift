/// One HTTP request as the emulator's state sees it: no NIO types, so that the state can be driven directly.
struct EmulatorRequest: Sendable {
    /// Upper-case method, such as `POST`.
    var method: String
    /// The path part of the request target, still percent-encoded.
    var path: String
    /// The query part of the request target (after `?`), still encoded; empty when there is none.
    var query: String
    /// Header fields in the order received, names as sent.
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    /// The connection it came on (numbered from 1 in the order accepted; 0 when driven without a server).
    var connection = 0
    /// Its place on that connection: 1 for the first request, 2 for the next one on the kept-alive connection…
    var requestOnConnection = 0

    init(
        method: String, target: String, headers: [(name: String, value: String)], body: [UInt8],
        connection: Int = 0, requestOnConnection: Int = 0
    ) {
        self.method = method.uppercased()
        if let mark = target.firstIndex(of: "?") {
            self.path = String(target[..<mark])
            self.query = String(target[target.index(after: mark)...])
        } else {
            self.path = target
            self.query = ""
        }
        self.headers = headers
        self.body = body
        self.connection = connection
        self.requestOnConnection = requestOnConnection
    }

    /// All values of the header `name` (compared case-insensitively), trimmed of surrounding blanks.
    func headerValues(_ name: String) -> [String] {
        let wanted = name.lowercased()
        return headers.filter { $0.name.lowercased() == wanted }.map {
            $0.value.trimmingCharacters(in: [" ", "\t"])
        }
    }

    /// The single value of header `name`, or nil when it is absent or repeated.
    func header(_ name: String) -> String? {
        let values = headerValues(name)
        return values.count == 1 ? values[0] : nil
    }

    /// The media type of `Content-Type` in lower case, without parameters.
    var mediaType: String? {
        guard let value = header("content-type") else { return nil }
        let type = value.split(separator: ";", maxSplits: 1).first ?? ""
        return type.trimmingCharacters(in: [" ", "\t"]).lowercased()
    }

    /// The path split into percent-decoded segments (`/replenish/slot-1` gives `["replenish", "slot-1"]`).
    var pathSegments: [String]? {
        var segments: [String] = []
        for raw in path.split(separator: "/", omittingEmptySubsequences: false).dropFirst() {
            guard let decoded = raw.removingPercentEncoding else { return nil }
            segments.append(decoded)
        }
        return segments
    }

    /// The query decoded as form pairs; nil when malformed.
    var queryItems: [(name: String, value: String)]? {
        FormEncoding.decode(query)
    }
}
