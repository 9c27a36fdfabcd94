import Foundation

/// The DRS device API (docs/protocol.md): token and version-header checks, then each call.
extension EmulatorState {
    static let schemaPrefix = "com.amazon.dash.replenishment."
    static let invalidTokenErrorType =
        "InvalidTokenException:http://internal.amazon.com/coral/com.amazon.dash.replenishment/"

    /// The schemas one DRS call accepts in `x-amzn-type-version` and `x-amzn-accept-type`.
    struct Schemas {
        var input: String
        var results: [String]

        static let replenish = Schemas(input: "DrsReplenishInput@1.0", results: ["DrsReplenishResult@1.0"])
        static let slotStatus = Schemas(input: "DrsSlotStatusInput@1.0", results: ["DrsSlotStatusResult@1.0"])
        static let deviceStatus = Schemas(
            input: "DrsDeviceStatusInput@1.0", results: ["DrsDeviceStatusResult@1.0"])
        static let subscriptionInfo = Schemas(
            input: "DrsSubscriptionInfoInput@1.0",
            results: ["DrsSubscriptionInfoResult@1.0", "DrsSubscriptionInfoResult@2.0"])
        static let deregister = Schemas(input: "DrsDeregisterInput@2.0", results: ["DrsDeregisterResult@1.0"])
        static let cancelTestOrders = Schemas(
            input: "DrsCancelTestOrdersInput@1.0", results: ["DrsCancelTestOrdersResult@1.0"])
        static let orderInfo = Schemas(input: "DrsOrderInfoInput@1.0", results: ["DrsOrderInfoResult@1.0"])
    }

    /// A request that passed the checks every DRS call shares.
    struct AuthorizedCall {
        var device: DeviceIdentity
        /// The accepted `x-amzn-accept-type`, echoed as the answer's `x-amzn-type-version`.
        var resultSchema: String

        var echo: [(name: String, value: String)] { [("x-amzn-type-version", resultSchema)] }
    }

    /// Checks the bearer token, then the two version headers.
    mutating func authorizeDRS(_ request: EmulatorRequest, _ schemas: Schemas, now: Date) throws(Refusal)
        -> AuthorizedCall
    {
        guard let device = bearerDevice(request, now: now) else {
            stats.invalidTokenAnswers += 1
            var answer = EmulatorResponse.message(
                400, "Invalid token", headers: [("X-Amzn-Errortype", Self.invalidTokenErrorType)])
            answer.reason = "Invalid token"
            throw Refusal(answer)
        }
        let input = Self.schemaPrefix + schemas.input
        guard request.header("x-amzn-type-version") == input else {
            throw Refusal(
                .message(400, "Invalid or missing x-amzn-type-version header: expected \(input)"))
        }
        let results = schemas.results.map { Self.schemaPrefix + $0 }
        guard let accept = request.header("x-amzn-accept-type"), results.contains(accept) else {
            throw Refusal(
                .message(
                    400,
                    "Invalid or missing x-amzn-accept-type header: expected \(results.joined(separator: " or "))"))
        }
        return AuthorizedCall(device: device, resultSchema: accept)
    }

    /// The device of a valid, unexpired `Authorization: Bearer` token.
    private func bearerDevice(_ request: EmulatorRequest, now: Date) -> DeviceIdentity? {
        guard let value = request.header("authorization") else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: [" ", "\t"])
        guard let record = accessTokens[token], record.isValid(at: now) else { return nil }
        return devices[record.deviceKey]
    }

    private static func orderKey(_ device: DeviceIdentity, _ slot: String) -> String {
        device.key + "\n" + slot
    }

    /// Keeps every header of a replenish request for `/admin/stats` (names lower-cased, repeats joined).
    mutating func recordReplenishHeaders(_ request: EmulatorRequest) {
        var headers: [String: String] = [:]
        for header in request.headers {
            let name = header.name.lowercased()
            headers[name] = headers[name].map { $0 + ", " + header.value } ?? header.value
        }
        stats.lastReplenishHeaders = headers
    }

    /// `POST /replenish/{slotId}`: places an order, or reports the one in progress.
    mutating func replenish(_ request: EmulatorRequest, slot: String, now: Date) throws(Refusal) -> EmulatorResponse {
        stats.replenishCalls[slot, default: 0] += 1
        recordReplenishHeaders(request)
        let call = try authorizeDRS(request, .replenish, now: now)
        guard config.slots.contains(slot) else { return .message(404, "Slot \(slot) not found") }
        guard subscribed[slot] == true else { return .message(400, "Slot not subscribed") }
        let key = Self.orderKey(call.device, slot)
        if let existing = ordersInProgress[key] {
            stats.orderInProgressAnswers[slot, default: 0] += 1
            return .json(
                200, .obj(["eventInstanceId": .string(existing), "detailCode": "ORDER_INPROGRESS"]),
                headers: call.echo)
        }
        let id = "amzn1.dash.v2.o." + RandomText.alphanumeric(40)
        orders[id] = PlacedOrder(eventInstanceId: id, deviceKey: call.device.key, slotId: slot, placedAt: now)
        ordersInProgress[key] = id
        stats.ordersPlaced[slot, default: 0] += 1
        let detail = call.device.isTestDevice ? "TEST_ORDER_PLACED" : "STANDARD_ORDER_PLACED"
        return .json(200, .obj(["eventInstanceId": .string(id), "detailCode": .string(detail)]), headers: call.echo)
    }

    /// The JSON object body of a status call, or the 400 that refuses it.
    private func statusBody(_ request: EmulatorRequest) throws(Refusal) -> JSONValue {
        guard request.mediaType == "application/json" else {
            throw Refusal(.message(400, "Content-Type must be application/json"))
        }
        guard let body = try? JSONValue.parse(request.body), case .object = body else {
            throw Refusal(.message(400, "Body must be a JSON object"))
        }
        return body
    }

    /// `POST /slotStatus/{slotId}`.
    mutating func slotStatus(_ request: EmulatorRequest, slot: String, now: Date) throws(Refusal) -> EmulatorResponse {
        stats.slotStatusCalls += 1
        let call = try authorizeDRS(request, .slotStatus, now: now)
        guard config.slots.contains(slot) else { return .message(404, "Slot \(slot) not found") }
        let body = try statusBody(request)
        for field in ["expectedReplenishmentDate", "lastUseDate"] {
            guard let text = body[field]?.stringValue, ISO8601DateTime.isValid(text) else {
                return .message(400, "\(field) must be an ISO 8601 date-time with a zone")
            }
        }
        for field in ["remainingQuantityInUnit", "originalQuantityInUnit", "totalQuantityOnHand"] {
            // totalQuantityOnHand is optional (a device that cannot count what the household holds leaves it out).
            if field == "totalQuantityOnHand" && body[field] == nil { continue }
            guard let number = body[field]?.numberValue, number >= 0 else {
                return .message(400, "\(field) must be a number, at least 0")
            }
        }
        stats.lastSlotStatus[slot] = body
        return .json(200, .obj([:]), headers: call.echo)
    }

    /// `POST /deviceStatus`.
    mutating func deviceStatus(_ request: EmulatorRequest, now: Date) throws(Refusal) -> EmulatorResponse {
        stats.deviceStatusCalls += 1
        let call = try authorizeDRS(request, .deviceStatus, now: now)
        let body = try statusBody(request)
        guard let text = body["mostRecentlyActiveDate"]?.stringValue, ISO8601DateTime.isValid(text) else {
            return .message(400, "mostRecentlyActiveDate must be an ISO 8601 date-time with a zone")
        }
        stats.lastDeviceStatus = body
        return .json(200, .obj([:]), headers: call.echo)
    }

    /// `GET /subscriptionInfo`, in the `@1.0` (booleans) or `@2.0` (objects) form the client accepts.
    mutating func subscriptionInfo(_ request: EmulatorRequest, now: Date) throws(Refusal) -> EmulatorResponse {
        stats.subscriptionInfoCalls += 1
        let call = try authorizeDRS(request, .subscriptionInfo, now: now)
        let version2 = call.resultSchema.hasSuffix("@2.0")
        let slots: [JSONValue.Member] = config.slots.map { slot in
            let isSubscribed = subscribed[slot] == true
            guard version2 else { return .init(key: slot, value: .bool(isSubscribed)) }
            let products: [JSONValue] =
                isSubscribed ? [.obj(["asin": "B000EMULATE", "quantity": 1, "unit": "count"])] : []
            return .init(
                key: slot, value: .obj(["subscribed": .bool(isSubscribed), "productInfoList": .array(products)]))
        }
        return .json(200, .obj(["slotsSubscriptionStatus": .object(slots)]), headers: call.echo)
    }

    /// `DELETE /registration`: every token and code of the device stops working.
    mutating func deregister(_ request: EmulatorRequest, now: Date) throws(Refusal) -> EmulatorResponse {
        stats.deregisterCalls += 1
        let call = try authorizeDRS(request, .deregister, now: now)
        let key = call.device.key
        for (token, record) in accessTokens where record.deviceKey == key { accessTokens[token]?.revoked = true }
        for (token, record) in refreshTokens where record.deviceKey == key { refreshTokens[token]?.revoked = true }
        for (code, record) in codes where record.device.key == key { codes[code]?.revoked = true }
        for (code, pair) in codePairs where pair.device.key == key { codePairs[code]?.revoked = true }
        stats.deregistrations += 1
        return .json(200, .obj([:]), headers: call.echo)
    }

    /// `DELETE /testOrders` (all slots) and `DELETE /testOrders/slots/{slotId}` (one): cancels the device's
    /// orders in progress.
    mutating func cancelTestOrders(_ request: EmulatorRequest, slot: String?, now: Date) throws(Refusal)
        -> EmulatorResponse
    {
        stats.cancelTestOrdersCalls += 1
        let call = try authorizeDRS(request, .cancelTestOrders, now: now)
        if let slot, !config.slots.contains(slot) { return .message(404, "Slot \(slot) not found") }
        guard call.device.isTestDevice else { return .message(400, "Only a test device can cancel test orders") }
        let slots = slot.map { [$0] } ?? config.slots
        var statuses: [JSONValue] = []
        for slot in slots {
            let key = Self.orderKey(call.device, slot)
            if let id = ordersInProgress.removeValue(forKey: key) { orders[id]?.status = .cancelled }
            statuses.append(.obj(["slotId": .string(slot), "orderStatus": "NO_ORDER_IN_PROGRESS"]))
        }
        return .json(200, .obj(["slotOrderStatuses": .array(statuses)]), headers: call.echo)
    }

    /// `GET /getOrderInfo/{eventInstanceId}`: one of the device's own orders.
    mutating func orderInfo(_ request: EmulatorRequest, eventInstanceId: String, now: Date) throws(Refusal)
        -> EmulatorResponse
    {
        stats.orderInfoCalls += 1
        let call = try authorizeDRS(request, .orderInfo, now: now)
        guard let order = orders[eventInstanceId], order.deviceKey == call.device.key else {
            return .message(404, "Order \(eventInstanceId) not found")
        }
        let item: JSONValue = .obj([
            "asin": "B000EMULATE", "expectedDeliveryDate": .null, "quantity": 1, "slotId": .string(order.slotId),
            "status": .string(order.status.rawValue),
        ])
        return .json(
            200,
            .obj(["orderInfoData": .obj(["instanceId": .string(order.eventInstanceId), "orderItems": .array([item])])]),
            headers: call.echo)
    }
}
