import NIOPosix
import Synchronization

/// One lane of the device's HTTP traffic: one libcurl easy handle driven by one dedicated thread, so a
/// request never blocks Swift's cooperative thread pool. Requests of a lane run one at a time, in the order
/// they were sent; the agent has two lanes (`Agent.run`), one for LWA and one for DRS, so that a slow DRS
/// call (up to its 30 s timeout) never holds back a due token refresh. GETs of a lane may share a kept-alive
/// connection; every other request gets a connection of its own (see `CurlEasy`).
final class CurlHTTPClient: HTTPClient, @unchecked Sendable {
    // @unchecked: `easy` is touched only on `worker`'s single thread.
    private let worker: NIOThreadPool
    private let easy: CurlEasy
    private let name: String
    /// Whether `worker`'s thread has been started (at the first request, not at init: NIO's start waits until
    /// the new thread runs, and the daemon's start sends no request before READY=1).
    private let started = Mutex(false)

    /// `name`: the lane's thread's (`lwa-lane`, `drs-lane`), for `top -H`.
    init(options: CurlEasy.Options, name: String = "curl-lane") throws(AgentError) {
        easy = try CurlEasy(options: options)
        worker = NIOThreadPool(numberOfThreads: 1)
        self.name = name
    }

    /// Starts the lane's thread once, before its first request is queued.
    private func startOnce() {
        started.withLock { started in
            guard !started else { return }
            started = true
            worker.start()
            worker.submit { [name] _ in POSIX.nameThisThread(name) }
        }
    }

    deinit { worker.shutdownGracefully { _ in } }

    func send(_ request: HTTPRequest) async throws(AgentError) -> HTTPResponse {
        // The config is checked at load; checking each request too means no code path can send a token in
        // clear text to a host that is not this machine.
        _ = try EndpointURL(String(request.url.prefix { $0 != "?" }))
        // A cancelled caller (the agent stopping) ends the transfer within about a second instead of waiting for
        // the answer (up to the request's timeout): a stop stays bounded. A call ended that way may have reached
        // the server; its caller keeps treating it as sent, answer unknown.
        let abort = TransferAbort()
        startOnce()
        do {
            return try await withTaskCancellationHandler {
                try await worker.runIfActive { try self.easy.perform(request, abort: abort) }
            } onCancel: {
                abort.abort()
            }
        } catch let error as AgentError {
            throw error
        } catch {
            throw AgentError(.network, "HTTP client stopped: \(error)")
        }
    }
}
