/// An error of the service, with a code that says what it does about it.
public struct CloudError: Error, CustomStringConvertible, Sendable {
    public struct Code: Equatable, Sendable, CustomStringConvertible {
        enum Value: String, Sendable {
            case databaseTooNew, badConfig, badRequest, forbidden, notFound, conflict, unauthorized
            case upstream
        }
        let value: Value
        /// The database's schema is newer than this build: the copy does not start.
        public static let databaseTooNew = Code(value: .databaseTooNew)
        /// The configuration is incomplete or wrong: the copy does not start.
        public static let badConfig = Code(value: .badConfig)
        /// A request is malformed (HTTP 400): nothing changed.
        public static let badRequest = Code(value: .badRequest)
        /// A proof or an identity does not match (HTTP 403): nothing changed.
        public static let forbidden = Code(value: .forbidden)
        /// A unit is not registered (HTTP 404).
        public static let notFound = Code(value: .notFound)
        /// A nonce was used or another customer holds the unit (HTTP 409): nothing changed.
        public static let conflict = Code(value: .conflict)
        /// No credential, or one that is not valid (HTTP 401).
        public static let unauthorized = Code(value: .unauthorized)
        /// LWA or the event gateway answered with an error or not at all: retried later where it can be.
        public static let upstream = Code(value: .upstream)
        public var description: String { value.rawValue }
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}
