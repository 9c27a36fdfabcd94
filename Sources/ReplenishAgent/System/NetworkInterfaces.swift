#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the device is called on the network: the addresses of its interfaces and its host name. The pairing
/// guard checks a request's `Host` against these.
enum NetworkInterfaces {
    /// Every IPv4 and IPv6 address of every interface (`getifaddrs`, loopback included), as text (`192.168.1.20`,
    /// `fe80::1`); empty when the list cannot be read.
    static func addresses() -> [String] {
        var list: UnsafeMutablePointer<ifaddrs>?  // SAFETY: filled by getifaddrs, freed once by the defer below.
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var found: [String] = []
        var next = list
        // SAFETY: every `entry`, its `ifa_addr` and `ifa_next` point into the list getifaddrs allocated, which
        // stays alive until the `freeifaddrs` above runs after this loop; nothing of it is kept.
        while let entry = next {
            defer { next = entry.pointee.ifa_next }
            guard let address = entry.pointee.ifa_addr else { continue }
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                // SAFETY: `sa_family` is AF_INET, so the kernel's sockaddr is a sockaddr_in; inet_ntop writes at
                // most `text.count` bytes.
                address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                    var raw = pointer.pointee.sin_addr
                    _ = inet_ntop(AF_INET, &raw, &text, socklen_t(text.count))
                }
            case AF_INET6:
                // SAFETY: `sa_family` is AF_INET6, so the kernel's sockaddr is a sockaddr_in6; inet_ntop writes at
                // most `text.count` bytes.
                address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                    var raw = pointer.pointee.sin6_addr
                    _ = inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count))
                }
            default: continue
            }
            let name = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if !name.isEmpty { found.append(name) }
        }
        return found
    }

    /// The host name (`gethostname`), or nil when it cannot be read or is empty.
    static func hostName() -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }

    /// Whether the kernel has a default route through an interface other than loopback (IPv4 or IPv6), read from
    /// `/proc/self/net/route` and `/proc/self/net/ipv6_route` (memory, no library; the unit's `ProcSubset=pid` hides
    /// `/proc/net` but not the process's own view of its network namespace): how the Wi-Fi setup decides, without
    /// asking NetworkManager, that a unit is on a network. False when neither can be read.
    static func hasDefaultRoute() -> Bool {
        func lines(_ path: String) -> [[Substring]] {
            guard let bytes = try? POSIX.readFile(path, limit: 1 << 20, .memory) else { return [] }
            return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map {
                $0.split(whereSeparator: { $0 == " " || $0 == "\t" })
            }
        }
        // Iface Destination Gateway Flags RefCnt Use Metric Mask …: destination and mask 0, flags RTF_UP (1).
        let ipv4 = lines("/proc/self/net/route").dropFirst().contains { fields in
            fields.count >= 8 && fields[0] != "lo" && fields[1] == "00000000" && fields[7] == "00000000"
                && (Int(fields[3], radix: 16) ?? 0) & 1 != 0
        }
        // destination, its prefix length, …, flags, interface: ::/0 through anything but lo, not RTF_REJECT.
        let ipv6 = lines("/proc/self/net/ipv6_route").contains { fields in
            fields.count >= 10 && fields[9] != "lo" && fields[1] == "00" && fields[0].allSatisfy { $0 == "0" }
                && (Int(fields[8], radix: 16) ?? 0) & 0x0200 == 0
        }
        return ipv4 || ipv6
    }
}
