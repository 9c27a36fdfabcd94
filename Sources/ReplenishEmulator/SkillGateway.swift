import Foundation

/// The maker's smart home skill as Alexa sees it: the customers' account links, their grants, the event
/// gateway's tokens and what the gateway accepted (`EmulatorState+Gateway.swift`).
struct SkillGateway: Sendable {
    /// An event-gateway access token: whose, and until when.
    struct GatewayToken: Sendable {
        var customer: String
        var expiresAt: Date
    }

    /// Account-linking access tokens (LWA as the skill's OAuth provider) by token: the customer each names.
    var linkTokens: [String: String] = [:]
    /// AcceptGrant codes not yet exchanged, by code: the customer each is for.
    var grantCodes: [String: String] = [:]
    var accessTokens: [String: GatewayToken] = [:]
    /// Refresh tokens by token: the customer.
    var refreshTokens: [String: String] = [:]
    /// Customers who disabled the skill: the gateway answers SKILL_DISABLED_EXCEPTION for them.
    var disabled: Set<String> = []
    /// Every event accepted, in order, and how often each message id arrived (a resend after a lost answer).
    var accepted: [JSONValue] = []
    var deliveries: [String: Int] = [:]
    /// Every refusal: its code and what was wrong.
    var refusals: [(code: String, reason: String)] = []
}
