import Foundation

/// What the server is to do with one request, as the fault layer decided.
enum EmulatorDisposition: Sendable {
    /// Write this answer.
    case answer(EmulatorResponse)
    /// Write this answer's status and headers with a 5 MiB filler body (a `huge` fault).
    case answerHuge(EmulatorResponse)
    /// Close the connection without answering.
    case drop
    /// Wait, then ask `EmulatorState.resumeDelayed` for the real disposition.
    case delay(seconds: Double)
}

/// Fault injection around `handle`, the replenish event log, and the admin endpoints that drive them.
extension EmulatorState {
    /// The size of a `huge` fault's body.
    static let hugeBodySize = 5 * 1024 * 1024

    /// Decides and carries out what happens to a request: a queued or random fault, or the normal answer.
    mutating func dispatch(_ request: EmulatorRequest, now: Date) -> EmulatorDisposition {
        noteArrival(request)
        if !request.path.lowercased().hasPrefix("/admin/") {
            stats.arrivals.append(
                .init(
                    method: request.method, path: request.path, at: now,
                    userAgent: request.headerValues("user-agent").first ?? ""))
            if stats.arrivals.count > EmulatorStats.arrivalLimit { stats.arrivals.removeFirst() }
        }
        if config.dropReusedConnections, request.requestOnConnection > 1,
            !request.path.lowercased().hasPrefix("/admin/")
        {
            // The server closed the kept-alive connection just as the client reused it.
            stats.faultsInjected[.drop, default: 0] += 1
            faulted(request, fault: .drop, status: nil, answerDropped: true, now: now)
            return .drop
        }
        guard let fault = faults.take(forPath: request.path) else {
            return .answer(perform(request, fault: nil, answerDropped: false, now: now))
        }
        stats.faultsInjected[fault.kind, default: 0] += 1
        switch fault {
        case .delay(let seconds):
            return .delay(seconds: seconds)
        case .dropAfterWork:
            _ = perform(request, fault: .dropAfterWork, answerDropped: true, now: now)
            return .drop
        case .drop:
            faulted(request, fault: fault, status: nil, answerDropped: true, now: now)
            return .drop
        case .status(let status, let retryAfter, let body):
            var headers: [(name: String, value: String)] = [("Content-Type", "application/json")]
            if let retryAfter { headers.append(("Retry-After", retryAfter)) }
            headers.append(("X-Amzn-Requestid", RandomText.requestId()))
            let reason = "injected fault: status \(status)"
            stats.reject(.init(method: request.method, path: request.path, status: status, reason: reason))
            faulted(request, fault: fault, status: status, answerDropped: false, now: now)
            return .answer(EmulatorResponse(status: status, headers: headers, body: Array(body.utf8), reason: reason))
        case .garbage:
            faulted(request, fault: fault, status: 200, answerDropped: false, now: now)
            return .answer(
                EmulatorResponse(
                    status: 200,
                    headers: [("Content-Type", "application/json"), ("X-Amzn-Requestid", RandomText.requestId())],
                    body: Fault.garbageBody))
        case .huge:
            faulted(request, fault: fault, status: 200, answerDropped: false, now: now)
            return .answerHuge(
                EmulatorResponse(
                    status: 200,
                    headers: [("Content-Type", "application/json"), ("X-Amzn-Requestid", RandomText.requestId())]))
        }
    }

    /// The normal answer to a request whose `delay` fault has run out.
    mutating func resumeDelayed(_ request: EmulatorRequest, now: Date) -> EmulatorDisposition {
        .answer(perform(request, fault: .delay, answerDropped: false, now: now))
    }

    /// Counts what is counted for every request on arrival, whatever happens to it.
    mutating func noteArrival(_ request: EmulatorRequest) {
        if request.path.lowercased() == "/auth/o2/token" { stats.tokenRequests += 1 }
        stats.requests += 1
        if request.connection > 0 {
            stats.requestsByConnection[request.connection] = max(
                stats.requestsByConnection[request.connection] ?? 0, request.requestOnConnection)
        }
    }

    /// Does the real work of a request and logs it when it is a replenish call.
    private mutating func perform(
        _ request: EmulatorRequest, fault: Fault.Kind?, answerDropped: Bool, now: Date
    ) -> EmulatorResponse {
        let response = handle(request, now: now)
        logReplenish(request, response: response, fault: fault, answerDropped: answerDropped, now: now)
        return response
    }

    /// Logs a fault that replaced the work (and, for replenish, keeps its headers like a normal call would).
    private mutating func faulted(
        _ request: EmulatorRequest, fault: Fault, status: Int?, answerDropped: Bool, now: Date
    ) {
        guard ReplenishEventLog.isReplenish(request) else { return }
        recordReplenishHeaders(request)
        events.append(
            request, outcome: .faulted, status: status, fault: fault.kind,
            answerDropped: answerDropped, orderId: nil, detailCode: nil, at: now)
    }

    /// Logs a replenish call whose work ran, its outcome read from the answer the work produced.
    mutating func logReplenish(
        _ request: EmulatorRequest, response: EmulatorResponse, fault: Fault.Kind?, answerDropped: Bool, now: Date
    ) {
        guard ReplenishEventLog.isReplenish(request) else { return }
        var outcome = ReplenishEvent.Outcome.rejected
        var orderId: String?
        var detailCode: String?
        if response.status == 200, let body = try? JSONValue.parse(response.body) {
            orderId = body["eventInstanceId"]?.stringValue
            detailCode = body["detailCode"]?.stringValue
            outcome = detailCode == "ORDER_INPROGRESS" ? .inProgress : .placed
        }
        events.append(
            request, outcome: outcome, status: response.status, fault: fault,
            answerDropped: answerDropped, orderId: orderId, detailCode: detailCode, at: now)
    }

    // MARK: - Admin endpoints

    /// The request body as a JSON object (any content type), or the `400` that refuses it.
    private func adminBody(_ request: EmulatorRequest) -> Result<JSONValue, AdminError> {
        guard let body = try? JSONValue.parse(request.body), case .object = body else {
            return .failure("Body must be a JSON object")
        }
        return .success(body)
    }

    private static func refuse(_ error: AdminError) -> EmulatorResponse {
        .message(400, error.message)
    }

    /// `POST /admin/faults` `{"path":…,"count":N,"fault":{…}}`: queues a next-N fault; answers the listing.
    mutating func adminAddFault(_ request: EmulatorRequest) -> EmulatorResponse {
        let body: JSONValue
        switch adminBody(request) {
        case .success(let b): body = b
        case .failure(let error): return Self.refuse(error)
        }
        guard let path = body["path"]?.stringValue, !path.isEmpty else {
            return Self.refuse("path must be a non-empty string")
        }
        var count = 1
        if let value = body["count"], value != .null {
            guard let n = value.integerValue, n >= 1 else {
                return Self.refuse("count must be an integer of at least 1")
            }
            count = n
        }
        guard let faultJSON = body["fault"] else { return Self.refuse("fault is required") }
        switch Fault.parse(faultJSON) {
        case .success(let fault):
            faults.enqueue(.init(path: path, remaining: count, fault: fault))
            return .json(200, faults.json)
        case .failure(let error):
            return Self.refuse(error)
        }
    }

    /// `POST /admin/fault-rate` `{"rate":…,"seed":…,"paths":[…],"kinds":[…]}`; rate 0 turns it off.
    mutating func adminFaultRate(_ request: EmulatorRequest) -> EmulatorResponse {
        let body: JSONValue
        switch adminBody(request) {
        case .success(let b): body = b
        case .failure(let error): return Self.refuse(error)
        }
        guard let rate = body["rate"]?.numberValue, rate >= 0, rate <= 1 else {
            return Self.refuse("rate must be a number from 0 to 1")
        }
        guard rate > 0 else {
            faults.random = nil
            return .json(200, .obj(["rate": .null]))
        }
        let seed: UInt64
        switch body["seed"] {
        case nil, .null?:
            seed = 0
        case .string(let text)?:
            guard let value = UInt64(text) else { return Self.refuse("seed must be an integer") }
            seed = value
        case let value?:
            guard let n = value.integerValue else { return Self.refuse("seed must be an integer") }
            seed = UInt64(bitPattern: Int64(n))
        }
        var paths = ["/"]
        if let value = body["paths"], value != .null {
            let refusal: AdminError = "paths must be a non-empty array of non-empty strings"
            guard case .array(let items) = value, !items.isEmpty else { return Self.refuse(refusal) }
            let strings = items.compactMap(\.stringValue)
            guard strings.count == items.count, !strings.contains("") else { return Self.refuse(refusal) }
            paths = strings
        }
        var kinds = ["status500", "status503", "drop", "dropAfterWork", "garbage"]
        if let value = body["kinds"], value != .null {
            let names = Fault.randomKindNames.joined(separator: ", ")
            guard case .array(let items) = value, !items.isEmpty else {
                return Self.refuse("kinds must be a non-empty array of: \(names)")
            }
            kinds = []
            for item in items {
                guard let name = item.stringValue, Fault.named(name) != nil else {
                    return Self.refuse("kinds must be a non-empty array of: \(names)")
                }
                kinds.append(name)
            }
        }
        let random = FaultInjector.RandomRate(
            rate: rate, seed: seed, paths: paths, kinds: kinds, faults: kinds.compactMap(Fault.named),
            generator: SplitMix64(seed: seed))
        faults.random = random
        return .json(200, .obj(["rate": random.json]))
    }

    var rotationJSON: JSONValue {
        .obj([
            "rotate": .bool(config.rotateRefreshTokens),
            "oldTokenPolicy": .string(config.oldRefreshTokenPolicy.rawValue),
        ])
    }

    /// `POST /admin/rotation` `{"rotate":Bool,"oldTokenPolicy":"invalidate"|"until-used"}` (either or both).
    mutating func adminRotation(_ request: EmulatorRequest) -> EmulatorResponse {
        let body: JSONValue
        switch adminBody(request) {
        case .success(let b): body = b
        case .failure(let error): return Self.refuse(error)
        }
        var rotate = config.rotateRefreshTokens
        var policy = config.oldRefreshTokenPolicy
        if let value = body["rotate"] {
            guard let flag = value.boolValue else { return Self.refuse("rotate must be a boolean") }
            rotate = flag
        }
        if let value = body["oldTokenPolicy"] {
            guard let name = value.stringValue, let p = EmulatorConfig.OldRefreshTokenPolicy(rawValue: name) else {
                return Self.refuse("oldTokenPolicy must be invalidate or until-used")
            }
            policy = p
        }
        guard body["rotate"] != nil || body["oldTokenPolicy"] != nil else {
            return Self.refuse("give rotate, oldTokenPolicy or both")
        }
        config.rotateRefreshTokens = rotate
        config.oldRefreshTokenPolicy = policy
        return .json(200, rotationJSON)
    }

    /// `POST /admin/check-refresh-token` `{"refreshToken":…}`: would a refresh grant with it succeed now
    /// (client id aside)? Changes nothing.
    func adminCheckRefreshToken(_ request: EmulatorRequest) -> EmulatorResponse {
        let body: JSONValue
        switch adminBody(request) {
        case .success(let b): body = b
        case .failure(let error): return Self.refuse(error)
        }
        guard let token = body["refreshToken"]?.stringValue else { return Self.refuse("refreshToken must be a string") }
        // The same test as the refresh grant's first check.
        let valid = refreshTokens[token].map { !$0.revoked && devices[$0.deviceKey] != nil } ?? false
        return .json(200, .obj(["valid": .bool(valid)]))
    }

    /// `GET /admin/events[?since=SEQ]`: the replenish event log, oldest first.
    func adminEvents(_ request: EmulatorRequest) -> EmulatorResponse {
        var since = 0
        guard let items = request.queryItems else { return Self.refuse("Malformed query string") }
        if let text = items.first(where: { $0.name == "since" })?.value {
            guard let value = Int(text), value >= 0 else {
                return Self.refuse("since must be an integer of at least 0")
            }
            since = value
        }
        return .json(
            200,
            .obj([
                "replenish": .array(events.entries(since: since).map(\.json)),
                "lastSeq": .number(Double(events.lastSeq)),
            ]))
    }
}
