import NIOHTTP1

/// What a request to the pairing endpoints must look like before any endpoint sees it, so that a web page
/// in a browser on the same network cannot use the endpoints (DNS rebinding, cross-origin requests):
///
/// - its `Host` names the device itself: one of its addresses or its host name (with or without
///   `.local`), with or without the port; anything else is `421`;
/// - it carries no `Origin` (browsers send one on cross-origin requests and on every POST; the companion
///   app is not a browser): `403`;
/// - a POST's `Content-Type` is `application/json` (a page can send a "simple" form POST without asking
///   first, never a JSON one): `415`.
///
/// No CORS headers are ever sent, so a browser never lets a page read an answer. Each refusal has the
/// endpoints' error shape, `{"error":"INVALID_PARAM","message":…}`.
enum PairingRequestGuard {
    /// A Host name not known yet may be an address the device got since it last read its names: they are read
    /// again for it, at most every 5 s (a flood of wrong names does not turn into a flood of getifaddrs).
    static func mayReadNamesAgain<Instant: InstantProtocol>(lastReadAt: Instant?, now: Instant) -> Bool
    where Instant.Duration == Duration {
        lastReadAt.map { $0.duration(to: now) >= .seconds(5) } ?? true
    }

    static func refusal(_ request: ServerRequest, deviceNames: Set<String>, port: Int?) -> ServerResponse? {
        if request.headers.contains(name: "Origin") {
            return .error(403, "INVALID_PARAM", "cross-origin requests are refused (the request carries Origin)")
        }
        let hosts = request.headers["Host"]
        guard hosts.count == 1, let host = hostName(hosts[0], port: port) else {
            return .error(421, "INVALID_PARAM", "the Host header must name this device (its address or host name)")
        }
        guard deviceNames.contains(host) else {
            return .error(421, "INVALID_PARAM", "the Host header must name this device (its address or host name)")
        }
        if request.method == .POST {
            let types = request.headers["Content-Type"]
            let mediaType = types.first.map { String($0.prefix { $0 != ";" }).lowercased() }
            guard types.count == 1, mediaType?.trimmingSpaces == "application/json" else {
                return .error(415, "INVALID_PARAM", "the body must be sent as Content-Type: application/json")
            }
        }
        return nil
    }

    /// The host of a `Host` value (`name`, `name:port`, `[v6]`, `[v6]:port`), lowercased and without a
    /// trailing dot; nil when malformed or when it names another port than `port`.
    static func hostName(_ value: String, port: Int?) -> String? {
        var host: Substring
        var portText: Substring?
        if value.hasPrefix("[") {
            guard let close = value.firstIndex(of: "]") else { return nil }
            host = value[value.index(after: value.startIndex)..<close]
            let rest = value[value.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                portText = rest.dropFirst()
            }
        } else {
            let parts = value.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { return nil }
            host = parts[0]
            if parts.count == 2 { portText = parts[1] }
        }
        if let portText {
            guard let given = Int(portText), portText.allSatisfy(\.isNumber), port.map({ $0 == given }) ?? true
            else { return nil }
        }
        if host.hasSuffix(".") { host = host.dropLast() }
        // An IPv6 address's zone (`fe80::1%25wlan0`, or `%wlan0` as some clients send it) names the phone's own
        // interface, not the device: the address is compared without it.
        if value.hasPrefix("["), let percent = host.firstIndex(of: "%") { host = host[..<percent] }
        guard !host.isEmpty else { return nil }
        return host.lowercased()
    }

    /// The names this device answers to: `listenHost` (unless a wildcard), every address of its interfaces
    /// (`getifaddrs`, loopback and IPv6 link-local included), `localhost`, its host name with and without
    /// `.local`, and the host name avahi-daemon publishes (`published`: another after a conflict, such as
    /// `name-2.local`), with and without `.local`.
    static func deviceNames(listenHost: String, published: String? = nil) -> Set<String> {
        var names: Set<String> = ["localhost", "127.0.0.1", "::1"]
        if listenHost != "0.0.0.0" && listenHost != "::" && !listenHost.isEmpty {
            names.insert(listenHost.lowercased())
        }
        if let name = NetworkInterfaces.hostName()?.lowercased() {
            names.insert(name)
            let short = name.split(separator: ".").first.map(String.init) ?? name
            names.insert(short)
            names.insert(short + ".local")
        }
        for address in NetworkInterfaces.addresses() { names.insert(address.lowercased()) }
        if let published {
            names.insert(published)
            if published.hasSuffix(".local") { names.insert(String(published.dropLast(".local".count))) }
        }
        return names
    }
}
