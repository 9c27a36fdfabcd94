import Foundation

@testable import ReplenishAgent

/// A raw connection to a Unix stream socket (the agent's control socket), for requests held open.
final class UnixConnection {
    let fd: Int32

    init(path: String) throws {
        fd = socket(AF_UNIX, streamSocket, 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw AgentError(.invalidInput, "\(path) is too long for a unix socket")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let error = errno
            close(fd)
            throw AgentError(.network, "connect \(path): \(error)")
        }
    }

    deinit { close(fd) }

    /// Writes the whole text (a small request fits the socket buffer at once).
    func send(_ text: String) { _ = text.withCString { Glibc.send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) } }

    /// Bytes written that the agent has not read yet (`SIOCOUTQ`, which Linux supports on Unix stream
    /// sockets): 0 once the agent has taken the whole request.
    var unread: Int {
        var count: Int32 = 0
        // 0x5411: SIOCOUTQ (TIOCOUTQ), not exported by the C library's Swift module.
        return ioctl(fd, 0x5411, &count) == 0 ? Int(count) : -1
    }

    /// A POST of a JSON body, as the agent's own commands send it.
    static func post(_ path: String, _ body: String) -> String {
        "POST \(path) HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }
}
