import Foundation

/// Finds the label's device by DNS-SD: `avahi-browse -rpt _replenish._tcp` (avahi-utils; through the machine's
/// avahi-daemon), the service whose TXT `v` is 1 and whose `id` is the label's serial's.
enum Discovery {
    static func find(label: Label) throws -> String {
        let id = try label.serviceID
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
        // `=;iface;proto;name;type;domain;host;address;port;"txt" "txt"`, IPv4 first.
        var found: [(address: String, port: String, ipv4: Bool)] = []
        for line in text.split(separator: "\n") where line.hasPrefix("=;") {
            let fields = line.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
            guard fields.count >= 10 else { continue }
            let txt = fields[9...].joined(separator: ";")
            guard txt.contains("\"v=1\""), txt.contains("\"id=\(id)\"") else { continue }
            found.append((fields[7], fields[8], fields[2] == "IPv4"))
        }
        guard let best = found.first(where: \.ipv4) ?? found.first else {
            throw Failure(
                "no _replenish._tcp service with id=\(id) (serial \(label.serial)): is its pairing window open? Or give --device URL"
            )
        }
        let host = best.ipv4 ? best.address : "[\(best.address)]"
        return "http://\(host):\(best.port)"
    }
}
