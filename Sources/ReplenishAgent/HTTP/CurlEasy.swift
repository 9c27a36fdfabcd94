import CCurl

/// Every raw libcurl call of the agent lives in this file. One `CurlEasy` owns one easy handle; it is
/// used by one thread at a time (the client's worker), so it needs no lock.
final class CurlEasy {
    struct Options {
        var connectTimeoutMilliseconds = 10_000
        var maximumResponseBytes = 256 * 1024
        /// A PEM bundle used instead of the system's CA store.
        var caFile: String?
        /// Send the request over this Unix socket instead of TCP (the agent's control socket).
        var unixSocketPath: String?
    }

    /// libcurl's global state, initialised once before the first handle (libcurl asks for that).
    private static let globalInit: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

    private let handle: UnsafeMutableRawPointer
    private let options: Options

    init(options: Options) throws(AgentError) {
        guard Self.globalInit == CURLE_OK, let handle = curl_easy_init() else {
            throw AgentError(.network, "libcurl could not be initialised")
        }
        self.handle = handle
        self.options = options
    }

    deinit { curl_easy_cleanup(handle) }

    /// Accumulates one response; reached from libcurl's C callbacks through an Unmanaged pointer.
    private final class Collector {
        let limit: Int
        var body: [UInt8] = []
        var headers: [(String, String)] = []
        var overflowed = false
        init(limit: Int) { self.limit = limit }
    }

    /// Performs one request, blocking the calling thread. The connection is kept for the next request.
    func perform(_ request: HTTPRequest) throws(AgentError) -> HTTPResponse {
        // Reset clears the previous request's options but keeps live connections and caches.
        curl_easy_reset(handle)
        let collector = Collector(limit: options.maximumResponseBytes)
        let context = Unmanaged.passRetained(collector)
        defer { context.release() }

        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }
        // "Expect:" switches off libcurl's 100-continue wait for larger bodies.
        for line in request.headers.map({ "\($0.0): \($0.1)" }) + ["Expect:"] {
            guard let appended = curl_slist_append(headerList, line) else {
                throw AgentError(.network, "out of memory building request headers")
            }
            headerList = appended
        }

        var codes: [CURLcode] = [
            ccurl_setopt_string(handle, CURLOPT_URL, request.url),
            ccurl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"),
            ccurl_setopt_long(handle, CURLOPT_NOSIGNAL, 1),
            ccurl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0),
            ccurl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1),
            ccurl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2),
            ccurl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeoutMilliseconds),
            ccurl_setopt_long(handle, CURLOPT_TIMEOUT_MS, request.timeoutSeconds * 1000),
            ccurl_setopt_long(handle, CURLOPT_TCP_KEEPALIVE, 1),
            ccurl_setopt_pointer(handle, CURLOPT_HTTPHEADER, headerList),
            ccurl_setopt_pointer(handle, CURLOPT_WRITEDATA, context.toOpaque()),
            ccurl_setopt_pointer(handle, CURLOPT_HEADERDATA, context.toOpaque()),
            ccurl_setopt_write_callback(
                handle, CURLOPT_WRITEFUNCTION,
                { data, size, count, userdata in
                    let collector = Unmanaged<Collector>.fromOpaque(userdata!).takeUnretainedValue()
                    let length = size * count
                    if collector.body.count + length > collector.limit {
                        collector.overflowed = true
                        return 0  // anything but `length` makes libcurl abort with CURLE_WRITE_ERROR
                    }
                    if let data {
                        collector.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
                    }
                    return length
                }),
            ccurl_setopt_write_callback(
                handle, CURLOPT_HEADERFUNCTION,
                { data, size, count, userdata in
                    let collector = Unmanaged<Collector>.fromOpaque(userdata!).takeUnretainedValue()
                    let length = size * count
                    guard let data else { return length }
                    let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
                    if line.hasPrefix("HTTP/") {
                        collector.headers.removeAll()  // a new response (after a 1xx) starts over
                    } else if let colon = line.firstIndex(of: ":") {
                        let name = line[..<colon].lowercased()
                        let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t\r\n")
                        collector.headers.append((name, value))
                    }
                    return length
                }),
        ]
        if let caFile = options.caFile { codes.append(ccurl_setopt_string(handle, CURLOPT_CAINFO, caFile)) }
        if let path = options.unixSocketPath {
            codes.append(ccurl_setopt_string(handle, CURLOPT_UNIX_SOCKET_PATH, path))
        }
        switch request.method {
        case .get: codes.append(ccurl_setopt_long(handle, CURLOPT_HTTPGET, 1))
        case .post: codes.append(ccurl_setopt_long(handle, CURLOPT_POST, 1))
        case .delete: codes.append(ccurl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, "DELETE"))
        }
        if request.method == .post || request.body != nil {
            let body = request.body ?? []
            codes.append(ccurl_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
            // COPYPOSTFIELDS makes libcurl copy the bytes (POSTFIELDS would keep a pointer into a Swift array).
            codes.append(
                body.withUnsafeBufferPointer { buffer in
                    buffer.withMemoryRebound(to: CChar.self) { chars in
                        chars.baseAddress.map {
                            ccurl_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0))
                        }
                            ?? ccurl_setopt_string(handle, CURLOPT_COPYPOSTFIELDS, "")
                    }
                })
        }
        if let failed = codes.first(where: { $0 != CURLE_OK }) {
            throw AgentError(.network, "libcurl refused an option: \(Self.describe(failed))")
        }

        let result = curl_easy_perform(handle)
        if collector.overflowed {
            throw AgentError(.network, "answer larger than \(options.maximumResponseBytes) bytes was refused")
        }
        guard result == CURLE_OK else {
            throw AgentError(
                .network, "\(request.method.rawValue) \(Self.redactedTarget(request.url)): \(Self.describe(result))")
        }
        var status = 0
        _ = ccurl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return HTTPResponse(status: status, headers: collector.headers, body: collector.body)
    }

    static func describe(_ code: CURLcode) -> String {
        "\(String(cString: curl_easy_strerror(code))) (curl \(code.rawValue))"
    }

    /// Scheme, host and path of a URL, for messages (the agent never puts secrets in URLs, but be sure).
    static func redactedTarget(_ url: String) -> String {
        String(url.prefix { $0 != "?" })
    }

    /// Percent-encodes a form field with libcurl's own encoder.
    static func formEscape(_ text: String) -> String {
        guard let escaped = curl_easy_escape(nil, text, Int32(text.utf8.count)) else { return "" }
        defer { curl_free(escaped) }
        return String(cString: escaped)
    }
}

extension Substring {
    func trimmingCharacters(in set: String) -> String {
        var slice = self[...]
        while let first = slice.first, set.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, set.contains(last) { slice = slice.dropLast() }
        return String(slice)
    }
}
