/// One HTTP answer of the emulator, independent of NIO.
struct EmulatorResponse: Sendable {
    var status: Int
    /// Header fields to send; `Content-Length` is added by the server.
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    /// Why the request was refused, for `/admin/stats`; never sent. Nil for a success.
    var reason: String?

    init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = [], reason: String? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.reason = reason
    }

    /// A JSON answer with `Content-Type: application/json`.
    static func json(
        _ status: Int, _ value: JSONValue, headers: [(name: String, value: String)] = [], reason: String? = nil
    ) -> EmulatorResponse {
        EmulatorResponse(
            status: status,
            headers: [("Content-Type", "application/json")] + headers,
            body: Array(value.serialized.utf8),
            reason: reason
        )
    }

    /// A DRS-style error: `{"message":"…"}`.
    static func message(_ status: Int, _ text: String, headers: [(name: String, value: String)] = [])
        -> EmulatorResponse
    {
        .json(status, .obj(["message": .string(text)]), headers: headers, reason: text)
    }

    /// An LWA error: `{"error_description":"…","error":"<code>"}`.
    static func oauthError(_ status: Int, _ code: String, _ description: String) -> EmulatorResponse {
        .json(
            status,
            .obj(["error_description": .string(description), "error": .string(code)]),
            headers: [("Cache-Control", "no-store")],
            reason: "\(code): \(description)"
        )
    }

    /// The first value of header `name` (case-insensitive).
    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}
