import Foundation
import Synchronization

@testable import ReplenishAgent

/// Free TCP ports on loopback for the agents, emulators and TLS terminators the tests start.
enum FreePorts {
    /// The ports `take` handed out in this test process: never twice. The kernel may give a port just
    /// released to the next bind of port 0, so two tests running side by side got the same port before either
    /// agent had bound it (a clean-clone run: one test's companion paired the other test's agent).
    private static let portsHandedOut = Mutex<Set<Int>>([])

    /// A free TCP port on loopback (bound and released; the agent binds it right after), not handed out before.
    static func take() throws -> Int {
        for _ in 0..<1000 {
            let port = try releasedPort()
            if portsHandedOut.withLock({ $0.insert(port).inserted }) { return port }
        }
        throw AgentError(.network, "no free port that was not handed out already")
    }

    private static func releasedPort() throws -> Int {
        let fd = socket(AF_INET, streamSocket, 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw AgentError(.network, "no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
