import Foundation
import FoundationNetworking

/// The `companion` command's HTTP client: Foundation's `URLSession` (libcurl underneath, which the toolchain's
/// FoundationNetworking links), so the emulator builds no HTTP client or TLS package of its own. Redirects are
/// not followed (the code is read from `Location`); each request goes on a connection of its own
/// (`Connection: close`). Timeouts: 10 s without a byte of the answer, 20 s for the whole exchange.
final class CompanionHTTP: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        var bodyText: String { String(decoding: body, as: UTF8.self) }

        /// A header's value, its name in any case.
        func header(_ name: String) -> String? {
            headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
    }

    static let readSeconds = 10.0
    /// For one whole exchange, connecting included.
    static let exchangeSeconds = 20.0

    private lazy var session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = Self.readSeconds
        configuration.timeoutIntervalForResource = Self.exchangeSeconds
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        return URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
    }()

    /// One request, waited for: its answer whatever the status, or `NoAnswer` (no connection, a timeout, the
    /// connection closed before a whole answer).
    func send(_ method: String, _ url: String, headers: [(String, String)], body: [UInt8]?) throws -> Answer {
        guard let target = URL(string: url), ["http", "https"].contains(target.scheme ?? "") else {
            throw CompanionCommand.CompanionFailure(description: "not an http(s) URL: \(url)")
        }
        var request = URLRequest(url: target)
        request.httpMethod = method
        request.setValue("replenish-emulator-companion", forHTTPHeaderField: "User-Agent")
        request.setValue("close", forHTTPHeaderField: "Connection")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let body { request.httpBody = Data(body) }

        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var outcome: Result<Answer, NoAnswerError>?
        let task = session.dataTask(with: request) { data, response, error in
            if let response = response as? HTTPURLResponse, error == nil {
                var fields: [String: String] = [:]
                for (name, value) in response.allHeaderFields {
                    if let name = name as? String, let value = value as? String { fields[name] = value }
                }
                outcome = .success(Answer(status: response.statusCode, headers: fields, body: Array(data ?? Data())))
            } else {
                outcome = .failure(NoAnswerError(error: error))
            }
            done.signal()
        }
        task.resume()
        done.wait()
        switch outcome {
        case .success(let answer): return answer
        case .failure(let failure):
            throw CompanionCommand.NoAnswer(description: failure.describe(method: method, url: url))
        case nil: throw CompanionCommand.NoAnswer(description: "\(method) \(url) failed")
        }
    }

    /// A redirect is an answer here: the consent's `Location` carries the code.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    private struct NoAnswerError: Error {
        var error: (any Error)?

        func describe(method: String, url: String) -> String {
            switch (error as? URLError)?.code {
            case .timedOut?:
                "no complete answer from \(url) within its time (\(Int(CompanionHTTP.readSeconds)) s idle, \(Int(CompanionHTTP.exchangeSeconds)) s in all)"
            case .cannotConnectToHost?: "cannot connect for \(url): \(error.map { "\($0)" } ?? "refused")"
            default: "\(method) \(url) failed: \(error.map { "\($0)" } ?? "no answer")"
            }
        }
    }
}
