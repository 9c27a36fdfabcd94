import Foundation

/// The test-only admin interface under `/admin/` (plain JSON, no authentication).
extension EmulatorState {
    /// `POST /admin/deliver/{slotId}`: every device's order in progress for the slot is delivered.
    mutating func adminDeliver(slot: String) -> EmulatorResponse {
        guard config.slots.contains(slot) else { return .message(404, "Slot \(slot) not found") }
        var delivered: [JSONValue] = []
        for (key, id) in ordersInProgress where key.hasSuffix("\n" + slot) {
            ordersInProgress[key] = nil
            orders[id]?.status = .shipped
            delivered.append(.string(id))
        }
        return .json(200, .obj(["slotId": .string(slot), "delivered": .array(delivered)]))
    }

    /// `POST /admin/subscription/{slotId}?subscribed=true|false`.
    mutating func adminSubscription(_ request: EmulatorRequest, slot: String) -> EmulatorResponse {
        guard config.slots.contains(slot) else { return .message(404, "Slot \(slot) not found") }
        let value = request.queryItems?.first { $0.name == "subscribed" }?.value
        guard let value, value == "true" || value == "false" else {
            return .message(400, "Query parameter subscribed must be true or false")
        }
        subscribed[slot] = value == "true"
        return .json(200, .obj(["slotId": .string(slot), "subscribed": .bool(value == "true")]))
    }

    /// `POST /admin/revoke-refresh-tokens`: every device must pair again.
    mutating func adminRevokeRefreshTokens() -> EmulatorResponse {
        var count = 0
        for (token, record) in refreshTokens where !record.revoked {
            refreshTokens[token]?.revoked = true
            count += 1
        }
        return .json(200, .obj(["revoked": .number(Double(count))]))
    }

    /// `POST /admin/expire-access-tokens`: every access token issued so far is expired from now on.
    mutating func adminExpireAccessTokens(now: Date) -> EmulatorResponse {
        var count = 0
        for (token, record) in accessTokens where record.isValid(at: now) {
            accessTokens[token]?.expiresAt = now
            count += 1
        }
        return .json(200, .obj(["expired": .number(Double(count))]))
    }

    /// `GET /admin/pairing-secrets`: every authorization code issued, every `code_verifier` presented and every
    /// device code of a code pair issued, so that tests can check a device never printed them.
    func adminPairingSecrets() -> EmulatorResponse {
        .json(
            200,
            .obj([
                "codes": .array(codes.keys.sorted().map(JSONValue.string)),
                "verifiers": .array(presentedVerifiers.map(JSONValue.string)),
                "deviceCodes": .array(codePairs.keys.sorted().map(JSONValue.string)),
            ]))
    }
}
