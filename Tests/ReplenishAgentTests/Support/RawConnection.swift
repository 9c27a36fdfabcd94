import Foundation

@testable import ReplenishAgent

/// A raw TCP connection to loopback, for peers that do not behave like HTTP clients.
final class RawConnection {
    let fd: Int32

    /// Connects to `127.0.0.1:port`, from `source` (another loopback address plays another machine).
    init(port: Int, source: String? = nil) throws {
        fd = socket(AF_INET, streamSocket, 0)
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else { throw AgentError(.network, "bind \(source): \(errno)") }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw AgentError(.network, "connect: \(errno)") }
    }

    deinit { close(fd) }

    func send(_ text: String) { _ = text.withCString { write(fd, $0, strlen($0)) } }

    /// Writes all of `bytes` (blocking), as a client that uploads without reading; false when the peer
    /// closed or reset first.
    @discardableResult
    func sendAll(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    /// Half-closes the connection (`shutdown(SHUT_WR)`): the peer reads the end of the stream, and this side
    /// can still read its answer.
    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// One whole answer: its status code, head and body (framed by its `Content-Length`).
    struct Answer {
        var status: Int
        var head: String
        var body: String
    }

    /// Reads until `count` whole answers came, the peer closed, or `seconds` passed; `closed` says whether the
    /// peer closed (or reset) within that time.
    func receiveAnswers(_ count: Int, within seconds: Double) -> (answers: [Answer], closed: Bool) {
        var received: [UInt8] = []
        var answers: [Answer] = []
        var closed = false
        let separator = Array("\r\n\r\n".utf8)
        func takeAnswers() {
            while let end = received.indices.first(where: { received[$0...].starts(with: separator) }) {
                let head = String(decoding: received[..<end], as: UTF8.self)
                let lines = head.split(separator: "\r\n")
                let length =
                    lines.dropFirst().compactMap { line -> Int? in
                        let parts = line.split(separator: ":", maxSplits: 1)
                        guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                        return Int(parts[1].trimmingCharacters(in: .whitespaces))
                    }.first ?? 0
                let bodyStart = end + separator.count
                guard received.count >= bodyStart + length else { return }
                let status = lines.first.map { Int($0.dropFirst(9).prefix(3)) ?? 0 } ?? 0
                let body = String(decoding: received[bodyStart..<(bodyStart + length)], as: UTF8.self)
                answers.append(Answer(status: status, head: head, body: body))
                received.removeFirst(bodyStart + length)
            }
        }
        let deadline = Date().addingTimeInterval(seconds)
        while answers.count < count && !closed && Date() < deadline {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 50) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let read = Glibc.read(fd, &buffer, buffer.count)
            if read <= 0 {
                closed = true
            } else {
                received += buffer[0..<read]
            }
            takeAnswers()
        }
        return (answers, closed)
    }

    /// What arrives within `seconds`, up to the peer closing: nil when nothing came and it stayed open.
    func receive(within seconds: Double) -> (text: String, closed: Bool)? {
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 50) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 {
                if count < 0 && errno == ECONNRESET {
                    return ("reset after: " + String(decoding: received, as: UTF8.self), true)
                }
                return (String(decoding: received, as: UTF8.self), true)
            }
            received += buffer[0..<count]
            if String(decoding: received, as: UTF8.self).contains("\r\n\r\n") {
                return (String(decoding: received, as: UTF8.self), false)
            }
        }
        return received.isEmpty ? nil : (String(decoding: received, as: UTF8.self), false)
    }
}

/// `SOCK_STREAM` (1 on Linux, every architecture the agent runs on). Glibc's imported constant was "not found
/// in scope" in a clean build of this test module, in whichever file's batch met it first (an incremental build
/// of the same tree found it), so the tests name the value once here.
let streamSocket: Int32 = 1
