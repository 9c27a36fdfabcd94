import CCurl

/// A failure libcurl reported: what the agent asked of it, libcurl's code and libcurl's words for it. Carried
/// inside `AgentError` (as its `cause`), so callers and tests check the code (60: the server's certificate
/// could not be verified) instead of reading the message.
struct CurlError: Error, Sendable, CustomStringConvertible {
    /// Which of libcurl's code lists `code` is from.
    enum Kind: String, Sendable {
        /// `CURLcode`: the easy interface (a transfer, an option).
        case easy = "curl"
        /// `CURLUcode`: the URL parser.
        case url = "curl URL"
    }

    /// What was asked, such as `POST https://host/path` (never a query, a header or a body).
    var operation: String
    var kind: Kind
    /// libcurl's numeric code (`CURLcode` or `CURLUcode`).
    var code: Int
    /// libcurl's text for the code (`curl_easy_strerror` / `curl_url_strerror`).
    var text: String
    /// libcurl's message about this transfer (`CURLOPT_ERRORBUFFER`), when it left one: often more precise
    /// ("SSL certificate problem: unable to get local issuer certificate").
    var detail: String?

    /// Whether the request may have reached the server (and been acted on). False only when libcurl says no
    /// byte of it left (`CurlEasy.requestMayHaveLeft`): a replenish call that never left is not "sent, answer
    /// unknown".
    var requestSent = true

    init(operation: String, code: CURLcode, detail: String? = nil, requestSent: Bool = true) {
        self.operation = operation
        self.kind = .easy
        self.code = Int(code.rawValue)
        self.text = String(cString: curl_easy_strerror(code))
        self.detail = detail.flatMap { $0.isEmpty ? nil : $0 }
        self.requestSent = requestSent
    }

    init(operation: String, urlCode: CURLUcode) {
        self.operation = operation
        self.kind = .url
        self.code = Int(urlCode.rawValue)
        self.text = String(cString: curl_url_strerror(urlCode))
        self.detail = nil
    }

    var description: String { "\(operation): \(detail ?? text) (\(kind.rawValue) \(code))" }

    // The codes the agent and its tests name.
    /// No connection could be made (refused, unreachable).
    static let couldNotConnect = Int(CURLE_COULDNT_CONNECT.rawValue)
    /// The write callback refused the data (the answer was over the size cap).
    static let writeError = Int(CURLE_WRITE_ERROR.rawValue)
    /// The transfer or the connect timed out.
    static let timedOut = Int(CURLE_OPERATION_TIMEDOUT.rawValue)
    /// The server closed the connection without a byte of answer.
    static let gotNothing = Int(CURLE_GOT_NOTHING.rawValue)
    /// The server's certificate or name could not be verified.
    static let peerFailedVerification = Int(CURLE_PEER_FAILED_VERIFICATION.rawValue)
    /// The client certificate or its key could not be used (unreadable, not PEM, not a pair).
    static let clientCertificateProblem = Int(CURLE_SSL_CERTPROBLEM.rawValue)
    /// The TLS handshake failed (a server that refuses the client's certificate can end it this way).
    static let tlsConnectFailed = Int(CURLE_SSL_CONNECT_ERROR.rawValue)
    /// Receiving failed (with TLS 1.3 a refused client certificate shows first as the server's alert here).
    static let receiveFailed = Int(CURLE_RECV_ERROR.rawValue)
}

extension AgentError {
    /// The libcurl failure behind this error, if one is.
    var curl: CurlError? { cause as? CurlError }

    /// True when the failed request certainly never left the device (see `CurlError.requestSent`); every
    /// other failure may have reached the server.
    var requestNeverSent: Bool { curl.map { !$0.requestSent } ?? false }
}
