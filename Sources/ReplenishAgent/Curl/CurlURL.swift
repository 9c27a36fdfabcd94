import CCurl

/// A URL taken apart by libcurl's own parser (`curl_url`), the same one that will send the request, so the
/// agent's checks and libcurl can never read a URL differently.
struct CurlURL: Sendable {
    var scheme: String?
    var host: String?
    var user: String?
    var query: String?
    var fragment: String?

    init(parsing text: String) throws(CurlError) {
        guard let handle = curl_url() else {
            throw CurlError(operation: "parse URL", urlCode: CURLUE_OUT_OF_MEMORY)
        }
        // SAFETY: the handle is used only in this initialiser and freed when it returns.
        defer { curl_url_cleanup(handle) }
        let set = curl_url_set(handle, CURLUPART_URL, text, 0)
        guard set == CURLUE_OK else { throw CurlError(operation: "parse URL", urlCode: set) }
        func part(_ which: CURLUPart) -> String? {
            // SAFETY: an out-parameter libcurl fills with a string of its own, freed below.
            var pointer: UnsafeMutablePointer<CChar>?
            guard curl_url_get(handle, which, &pointer, 0) == CURLUE_OK, let pointer else { return nil }
            // SAFETY: libcurl allocated a NUL-terminated copy for us: read once, then given back with curl_free.
            defer { curl_free(pointer) }
            return String(cString: pointer)
        }
        scheme = part(CURLUPART_SCHEME)
        host = part(CURLUPART_HOST)
        user = part(CURLUPART_USER)
        query = part(CURLUPART_QUERY)
        fragment = part(CURLUPART_FRAGMENT)
    }
}
