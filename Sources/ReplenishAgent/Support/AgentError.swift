/// The one error type of the agent. Its codes mirror the Login with Amazon SDK's error categories, so a
/// device maker's support team can map a log line to a customer-facing reason. Each code says what the
/// device does about it. Messages never contain a secret (token, code, verifier, client secret).
public struct AgentError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure this is. Extensible: new codes do not break callers that switch on `Code`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case network, server, applicationNotAuthorized, unauthorizedClient, invalidInput, storage
            case accessDenied, notPaired, configuration, hardware
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// No answer: DNS, connect, TLS, timeout, dropped connection. Retried with backoff.
        public static let network = Code(.network)
        /// The service answered 5xx, or an answer the agent cannot read. Retried with backoff.
        public static let server = Code(.server)
        /// LWA `invalid_grant` on refresh: the customer removed the device. Tokens are wiped, pairing restarts.
        public static let applicationNotAuthorized = Code(.applicationNotAuthorized)
        /// LWA `invalid_client` / `unauthorized_client`: a configuration fault. Logged once, long backoff.
        public static let unauthorizedClient = Code(.unauthorizedClient)
        /// A request or answer is malformed (pairing request, server answer). Refused with a reason.
        public static let invalidInput = Code(.invalidInput)
        /// A state file could not be read or written. The operation is refused and nothing is lost.
        public static let storage = Code(.storage)
        /// DRS refused the call for this device or slot (4xx other than a token fault). The order is parked.
        public static let accessDenied = Code(.accessDenied)
        /// The device has no refresh token. Presses are refused until the companion app pairs it.
        public static let notPaired = Code(.notPaired)
        /// The config or board file is wrong. The agent does not start.
        public static let configuration = Code(.configuration)
        /// A GPIO chip or line could not be used. The agent does not start on that board.
        public static let hardware = Code(.hardware)

        public var description: String { base.rawValue }
    }

    public var code: Code
    /// A one-line, secret-free explanation for logs and command output.
    public var message: String
    /// The typed failure underneath, when a C library reported one (a `CurlError` from libcurl), for callers
    /// and tests that need its code rather than the message. Never holds a secret either.
    public var cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String { message }
}
