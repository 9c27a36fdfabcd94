import CCurl

/// One libcurl easy handle. The `Curl/` folder holds every raw libcurl call of the agent (a test fails if one
/// appears elsewhere). A `CurlEasy` is used by one thread at a time (its client's worker), so it needs no lock.
///
/// **Nothing is sent twice below the agent.** libcurl resends a request by itself, on a fresh connection,
/// when a connection it *reused* dies before the first byte of the answer ("Connection died, retrying a fresh
/// connect", `Curl_retry_request` in lib/transfer.c, called from lib/multi.c; up to 5 times). That retry needs
/// `conn->bits.reuse`, which is set only when a pooled connection is taken again; the other two resends there
/// (an HTTP/2 `REFUSED_STREAM`, an HTTP/2 → 1.1 downgrade) need HTTP/2. So every request that is not a GET
/// (replenish, slot and device status, deregistration, cancelling test orders, token requests) goes out on a
/// new connection (`CURLOPT_FRESH_CONNECT`) that is closed after its answer (`CURLOPT_FORBID_REUSE`), and
/// every request speaks HTTP/1.1. GETs may reuse a kept-alive connection: a resent GET changes nothing.
/// No `Expect: 100-continue` (whose `417` libcurl also answers with a resend), no redirects, no HTTP auth.
final class CurlEasy {
    struct Options {
        var connectTimeoutMilliseconds = 10_000
        var maximumResponseBytes = 256 * 1024
        /// A PEM bundle used instead of the system's CA store.
        var caFile: String?
        /// Send the request over this Unix socket instead of TCP (the agent's control socket).
        var unixSocketPath: String? = nil
        /// The client's certificate and private key, PEM files, for mutual TLS (the alexa program's unit
        /// certificate); libcurl reads them at each new connection.
        var clientCertificateFile: String? = nil
        var clientKeyFile: String? = nil
    }

    /// libcurl's global state, initialised once before the first handle (libcurl asks for that).
    private static let globalInit: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

    // SAFETY: libcurl's opaque handle, owned by this object: created in init, cleaned up in deinit, used by
    // one thread at a time.
    private let handle: UnsafeMutableRawPointer
    private let options: Options
    /// libcurl writes its message about a failed transfer here (`CURLOPT_ERRORBUFFER`).
    // SAFETY: CURL_ERROR_SIZE + 1 bytes owned by this object (allocated in init, freed in deinit).
    private let errorBuffer: UnsafeMutablePointer<CChar>

    init(options: Options) throws(AgentError) {
        guard Self.globalInit == CURLE_OK, let handle = curl_easy_init() else {
            let code = Self.globalInit == CURLE_OK ? CURLE_FAILED_INIT : Self.globalInit
            let error = CurlError(operation: "initialise libcurl", code: code)
            throw AgentError(.network, "libcurl could not be initialised", cause: error)
        }
        self.handle = handle
        self.options = options
        // SAFETY: allocated once for the handle's life, freed in deinit after the handle that may write to it.
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        curl_easy_cleanup(handle)
        // SAFETY: the handle is gone, so nothing writes to the buffer any more.
        errorBuffer.deallocate()
    }

    /// Accumulates one response; reached from libcurl's C callbacks through an Unmanaged pointer.
    private final class Collector {
        let limit: Int
        let abort: TransferAbort?
        var body: [UInt8] = []
        var headers: [(String, String)] = []
        var overflowed = false
        init(limit: Int, abort: TransferAbort?) {
            self.limit = limit
            self.abort = abort
        }

        /// The collector behind a callback's `userdata`.
        // SAFETY: userdata is the retained Collector set as WRITEDATA, HEADERDATA and XFERINFODATA for this
        // perform (`context`, released only after perform has returned).
        static func of(_ userdata: UnsafeMutableRawPointer?) -> Collector {
            Unmanaged<Collector>.fromOpaque(userdata!).takeUnretainedValue()
        }

        /// WRITEFUNCTION: `length` bytes of the body at `data`. Returns `length`, or 0 past the limit, which
        /// makes libcurl abort with CURLE_WRITE_ERROR.
        // SAFETY: `data` is libcurl's, `length` bytes valid during the callback only (used below as such).
        func appendBody(_ data: UnsafeMutablePointer<CChar>?, length: Int) -> Int {
            if body.count + length > limit {
                overflowed = true
                return 0
            }
            if let data {
                // SAFETY: libcurl passes `length` readable bytes at `data`, valid during this call; they are
                // copied before returning.
                body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
            }
            return length
        }

        /// HEADERFUNCTION: one header line of `length` bytes at `data` (a status line starts a new response,
        /// after a 1xx). Returns `length`.
        // SAFETY: `data` is libcurl's, `length` bytes valid during the callback only (used below as such).
        func addHeaderLine(_ data: UnsafeMutablePointer<CChar>?, length: Int) -> Int {
            guard let data else { return length }
            // SAFETY: `length` readable bytes at `data`, valid during this call; decoded (copied) here.
            let bytes = UnsafeRawBufferPointer(start: data, count: length)
            let line = String(decoding: bytes, as: UTF8.self)
            if line.hasPrefix("HTTP/") {
                headers.removeAll()  // a new response (after a 1xx) starts over
            } else if let colon = line.firstIndex(of: ":") {
                let name = line[..<colon].lowercased()
                let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t\r\n")
                headers.append((name, value))
            }
            return length
        }
    }

    /// `replenish-agent/0.1.0+412.g1a2b3c4d` (the package version of this build, or the release version when the
    /// build does not know it): on every request, so that LWA's and DRS's operators can tell device builds apart.
    static let userAgent: String = {
        let package = BuildInfo.packageVersion
        return "replenish-agent/" + (package == "unknown" || package.isEmpty ? BuildInfo.version : package)
    }()

    /// Whether a request may go out on a pooled connection and leave its own connection in the pool: only
    /// GETs, which are safe to repeat.
    static func mayReuseConnection(_ method: HTTPRequest.Method) -> Bool { method == .get }

    /// Performs one request, blocking the calling thread. GETs may keep their connection for the next GET;
    /// any other method uses a new connection and closes it (see the type's comment).
    /// With `abort`, the transfer ends (`CURLE_ABORTED_BY_CALLBACK`) within about a second of
    /// `TransferAbort.abort()`, whatever it is waiting for (libcurl calls the progress callback at least once a
    /// second, during the resolve and the connect too).
    func perform(_ request: HTTPRequest, abort: TransferAbort? = nil) throws(AgentError) -> HTTPResponse {
        let operation = "\(request.method.rawValue) \(Self.redactedTarget(request.url))"
        // Reset clears the previous request's options but keeps live connections and caches.
        curl_easy_reset(handle)
        if abort?.isAborted == true {
            let error = CurlError(operation: operation, code: CURLE_ABORTED_BY_CALLBACK, requestSent: false)
            throw AgentError(.network, "\(operation): stopped before it was sent", cause: error)
        }
        let collector = Collector(limit: options.maximumResponseBytes, abort: abort)
        // SAFETY: the retained reference keeps the collector alive until the defer below, which runs after
        // curl_easy_perform has returned; libcurl uses the pointer only during perform.
        let context = Unmanaged.passRetained(collector)
        defer { context.release() }

        // SAFETY: the list is owned here and freed after perform; libcurl only reads it during perform.
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }
        // "Expect:" switches off libcurl's 100-continue wait for larger bodies (and the resend after a 417).
        for line in request.headers.map({ "\($0.0): \($0.1)" }) + ["Expect:"] {
            guard let appended = curl_slist_append(headerList, line) else {
                throw AgentError(.network, "out of memory building request headers")
            }
            headerList = appended
        }
        // SAFETY: a zero first byte means "no message"; libcurl writes at most CURL_ERROR_SIZE bytes, with NUL.
        errorBuffer[0] = 0

        let reuse = Self.mayReuseConnection(request.method)
        var settings: [(String, CURLcode)] = [
            ("URL", ccurl_setopt_string(handle, CURLOPT_URL, request.url)),
            ("PROTOCOLS_STR", ccurl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")),
            ("REDIR_PROTOCOLS_STR", ccurl_setopt_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")),
            // Never a proxy, whatever the environment says (http_proxy, HTTPS_PROXY, ALL_PROXY…): through one,
            // an http:// request would carry tokens in clear text. "" turns proxies off; "*" exempts every host.
            ("PROXY", ccurl_setopt_string(handle, CURLOPT_PROXY, "")),
            ("NOPROXY", ccurl_setopt_string(handle, CURLOPT_NOPROXY, "*")),
            ("HTTP_VERSION", ccurl_setopt_long(handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))),
            ("FRESH_CONNECT", ccurl_setopt_long(handle, CURLOPT_FRESH_CONNECT, reuse ? 0 : 1)),
            ("FORBID_REUSE", ccurl_setopt_long(handle, CURLOPT_FORBID_REUSE, reuse ? 0 : 1)),
            ("NOSIGNAL", ccurl_setopt_long(handle, CURLOPT_NOSIGNAL, 1)),
            ("FOLLOWLOCATION", ccurl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0)),
            ("SSL_VERIFYPEER", ccurl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1)),
            ("SSL_VERIFYHOST", ccurl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2)),
            (
                "CONNECTTIMEOUT_MS",
                ccurl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeoutMilliseconds)
            ),
            ("TIMEOUT_MS", ccurl_setopt_long(handle, CURLOPT_TIMEOUT_MS, request.timeoutSeconds * 1000)),
            ("TCP_KEEPALIVE", ccurl_setopt_long(handle, CURLOPT_TCP_KEEPALIVE, 1)),
            ("HTTPHEADER", ccurl_setopt_pointer(handle, CURLOPT_HTTPHEADER, headerList)),
            ("USERAGENT", ccurl_setopt_string(handle, CURLOPT_USERAGENT, Self.userAgent)),
            // SAFETY: the buffer outlives the handle (see init/deinit).
            ("ERRORBUFFER", ccurl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer)),
            // SAFETY: `context` stays retained until perform has returned (see above).
            ("WRITEDATA", ccurl_setopt_pointer(handle, CURLOPT_WRITEDATA, context.toOpaque())),
            ("HEADERDATA", ccurl_setopt_pointer(handle, CURLOPT_HEADERDATA, context.toOpaque())),
            (
                "WRITEFUNCTION",
                ccurl_setopt_write_callback(handle, CURLOPT_WRITEFUNCTION) { data, size, count, userdata in
                    Collector.of(userdata).appendBody(data, length: size * count)
                }
            ),
            (
                "HEADERFUNCTION",
                ccurl_setopt_write_callback(handle, CURLOPT_HEADERFUNCTION) { data, size, count, userdata in
                    Collector.of(userdata).addHeaderLine(data, length: size * count)
                }
            ),
        ]
        if abort != nil {
            settings.append(("NOPROGRESS", ccurl_setopt_long(handle, CURLOPT_NOPROGRESS, 0)))
            // SAFETY: `context` stays retained until perform has returned (see above).
            settings.append(("XFERINFODATA", ccurl_setopt_pointer(handle, CURLOPT_XFERINFODATA, context.toOpaque())))
            settings.append(
                (
                    "XFERINFOFUNCTION",
                    ccurl_setopt_xferinfo_callback(handle) { userdata, _, _, _, _ in
                        Collector.of(userdata).abort?.isAborted == true ? 1 : 0
                    }
                ))
        }
        if let caFile = options.caFile {
            settings.append(("CAINFO", ccurl_setopt_string(handle, CURLOPT_CAINFO, caFile)))
        }
        if let certificate = options.clientCertificateFile, let key = options.clientKeyFile {
            settings.append(("SSLCERT", ccurl_setopt_string(handle, CURLOPT_SSLCERT, certificate)))
            settings.append(("SSLKEY", ccurl_setopt_string(handle, CURLOPT_SSLKEY, key)))
        }
        if let path = options.unixSocketPath {
            settings.append(("UNIX_SOCKET_PATH", ccurl_setopt_string(handle, CURLOPT_UNIX_SOCKET_PATH, path)))
        }
        switch request.method {
        case .get: settings.append(("HTTPGET", ccurl_setopt_long(handle, CURLOPT_HTTPGET, 1)))
        case .post: settings.append(("POST", ccurl_setopt_long(handle, CURLOPT_POST, 1)))
        case .delete: settings.append(("CUSTOMREQUEST", ccurl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, "DELETE")))
        }
        if request.method == .post || request.body != nil {
            let body = request.body ?? []
            settings.append(
                ("POSTFIELDSIZE_LARGE", ccurl_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
            )
            // COPYPOSTFIELDS makes libcurl copy the bytes (POSTFIELDS would keep a pointer into a Swift array).
            // SAFETY: the bytes are valid inside the closure, and libcurl copies them (COPYPOSTFIELDS,
            // POSTFIELDSIZE bytes) before setopt returns.
            let copied = body.withUnsafeBytes { bytes in
                guard let start = bytes.baseAddress else {
                    return ccurl_setopt_string(handle, CURLOPT_COPYPOSTFIELDS, "")
                }
                // SAFETY: `mutating` only fits setopt's `void *`: libcurl reads the bytes, it never writes them.
                return ccurl_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: start))
            }
            settings.append(("COPYPOSTFIELDS", copied))
        }
        if let (option, failed) = settings.first(where: { $0.1 != CURLE_OK }) {
            let error = CurlError(operation: "\(operation): option \(option)", code: failed)
            throw AgentError(.network, "libcurl refused an option: \(error)", cause: error)
        }

        let result = curl_easy_perform(handle)
        if collector.overflowed {
            let error = CurlError(operation: operation, code: result)
            throw AgentError(
                .network, "answer larger than \(options.maximumResponseBytes) bytes was refused", cause: error)
        }
        guard result == CURLE_OK else {
            // SAFETY: libcurl NUL-terminates what it writes; the extra byte allocated stays 0 in any case.
            let error = CurlError(
                operation: operation, code: result, detail: String(cString: errorBuffer),
                requestSent: requestMayHaveLeft())
            throw AgentError(.network, error.description, cause: error)
        }
        var status = 0
        _ = ccurl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return HTTPResponse(status: status, headers: collector.headers, body: collector.body)
    }

    /// Whether any byte of the failed transfer's request may have reached the network. No, only when libcurl
    /// never got to the transfer (`CURLINFO_PRETRANSFER_TIME_T` 0: the resolve, the connect or the TLS
    /// handshake failed, a certificate was refused) and counts no request bytes (`CURLINFO_REQUEST_SIZE` 0).
    /// Anything else, or an info libcurl cannot give, counts as sent: the server may have acted on it.
    private func requestMayHaveLeft() -> Bool {
        var requestSize = 0
        var pretransfer: curl_off_t = 0
        guard ccurl_getinfo_long(handle, CURLINFO_REQUEST_SIZE, &requestSize) == CURLE_OK,
            ccurl_getinfo_off_t(handle, CURLINFO_PRETRANSFER_TIME_T, &pretransfer) == CURLE_OK
        else { return true }
        return requestSize != 0 || pretransfer != 0
    }

    /// Scheme, host and path of a URL, for messages (the agent never puts secrets in URLs, but be sure).
    static func redactedTarget(_ url: String) -> String {
        String(url.prefix { $0 != "?" })
    }

    /// Percent-encodes a form field with libcurl's own encoder (everything but `A-Z a-z 0-9 - . _ ~`).
    static func formEscape(_ text: String) -> String {
        guard let escaped = curl_easy_escape(nil, text, Int32(text.utf8.count)) else { return "" }
        // SAFETY: libcurl returns a NUL-terminated string it allocated; copied, then given back with curl_free.
        defer { curl_free(escaped) }
        return String(cString: escaped)
    }
}
