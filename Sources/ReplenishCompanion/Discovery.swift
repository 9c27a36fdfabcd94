import Foundation

/// Finds the label's device by DNS-SD: `avahi-browse -rpt _replenish._tcp` (avahi-utils; through the machine's
/// avahi-daemon), every service whose TXT `v` is 2 and whose `id` is the label's serial's. The `id` is no
/// secret (anyone can compute it from a serial, and an impostor can advertise it too), so every match is a
/// candidate: the companion asks each in turn until one proves the label's key.
enum Discovery {
    static func find(label: Label) throws -> [String] {
        let id = label.serviceID
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/avahi-browse")
        process.arguments = ["-rpt", "_replenish._tcp"]
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch {
            throw Failure("cannot run avahi-browse (apt-get install avahi-utils), or give --device URL: \(error)")
        }
        let text = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let found = candidates(browsed: text, id: id)
        guard !found.isEmpty else {
            throw Failure(
                "no _replenish._tcp service with v=2 and id=\(id) (serial \(label.serial)): is its pairing window open? Or give --device URL"
            )
        }
        return found
    }

    /// The pairing URLs of the resolved lines (`=;iface;proto;name;type;domain;host;address;port;"txt" …`) that
    /// carry `v=2` and `id`, each address and port once, in avahi's order: an IPv6 address in brackets (a
    /// link-local one with its interface as the zone, `%25` in a URL). The protocol field says over which
    /// protocol mDNS answered, not the address's family (an IPv4 line may carry an IPv6 address): the address
    /// itself decides the brackets.
    static func candidates(browsed text: String, id: String) -> [String] {
        var urls: [String] = []
        for line in text.split(separator: "\n") where line.hasPrefix("=;") {
            let fields = line.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
            guard fields.count >= 10, let port = Int(fields[8]), (1...65535).contains(port) else { continue }
            let txt = fields[9...].joined(separator: ";")
            guard txt.contains("\"v=2\""), txt.contains("\"id=\(id)\"") else { continue }
            let url = "http://\(host(address: fields[7], interface: fields[1])):\(port)"
            if !urls.contains(url) { urls.append(url) }
        }
        return urls
    }

    /// An address as a URL's host: IPv4 as it is; IPv6 in brackets, a link-local one (`fe80::/10`) with its
    /// zone (the interface avahi found it on), the `%` written `%25` as RFC 6874 says.
    static func host(address: String, interface: String) -> String {
        guard address.contains(":") else { return address }
        var zoned = address
        let lowered = address.lowercased()
        let linkLocal = ["fe8", "fe9", "fea", "feb"].contains { lowered.hasPrefix($0) }
        if linkLocal, !address.contains("%"), !interface.isEmpty { zoned += "%" + interface }
        return "[" + zoned.replacingOccurrences(of: "%", with: "%25") + "]"
    }
}
