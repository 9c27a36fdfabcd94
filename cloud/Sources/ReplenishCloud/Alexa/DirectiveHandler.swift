import Foundation
import Logging

/// Answers the Alexa smart home directives of the maker's skill (Discovery, ReportState, AcceptGrant), as
/// Lambda hands them over (through the Web Adapter's pass-through path) or as any HTTP front posts them.
/// Every answer is a JSON message Alexa takes, an `ErrorResponse` included: a directive is never left without one.
public struct DirectiveHandler: Sendable {
    let store: CloudStore
    let lwa: any LoginWithAmazon
    let logger: Logger

    public init(store: CloudStore, lwa: any LoginWithAmazon, logger: Logger) {
        self.store = store
        self.lwa = lwa
        self.logger = logger
    }

    public func answer(_ message: JSON, now: Date) async -> JSON {
        let namespace = message.at("directive.header.namespace")?.string ?? ""
        let name = message.at("directive.header.name")?.string ?? ""
        let correlation = message.at("directive.header.correlationToken")?.string
        var metadata: Logger.Metadata = ["directive.namespace": "\(namespace)", "directive.name": "\(name)"]
        do {
            switch (namespace, name) {
            case ("Alexa.Discovery", "Discover"):
                return try await discover(message)
            case ("Alexa", "ReportState"):
                return try await reportState(message, correlation: correlation)
            case ("Alexa.Authorization", "AcceptGrant"):
                return await acceptGrant(message, now: now)
            default:
                return AlexaMessage.errorResponse(
                    type: "INVALID_DIRECTIVE", message: "\(namespace).\(name) is not handled by this skill",
                    correlationToken: correlation, endpoint: endpointReference(message))
            }
        } catch let failure as LWAFailure {
            metadata["lwa.error"] = "\(failure)"
            logger.notice("directive refused: the customer's token", metadata: metadata)
            let expired: Bool = if case .refused = failure { true } else { false }
            return AlexaMessage.errorResponse(
                type: expired ? "INVALID_AUTHORIZATION_CREDENTIAL" : "INTERNAL_ERROR",
                message: expired ? "the account-linking token is not valid" : "Login with Amazon did not answer",
                correlationToken: correlation, endpoint: endpointReference(message))
        } catch let error as CloudError where error.code == .notFound || error.code == .forbidden {
            return AlexaMessage.errorResponse(
                type: "NO_SUCH_ENDPOINT", message: error.message, correlationToken: correlation,
                endpoint: endpointReference(message))
        } catch {
            metadata["error"] = "\(error)"
            logger.error("directive failed", metadata: metadata)
            return AlexaMessage.errorResponse(
                type: "INTERNAL_ERROR", message: "the skill's service failed to answer", correlationToken: correlation,
                endpoint: endpointReference(message))
        }
    }

    /// The endpoint of a directive as an error answer repeats it (its id and scope), when it has one.
    func endpointReference(_ message: JSON) -> JSON? {
        guard let id = message.at("directive.endpoint.endpointId")?.string else { return nil }
        return ["endpointId": .string(id)]
    }

    /// `Alexa.Discovery` `Discover`: the customer's units, each with its model's inventory sensors.
    func discover(_ message: JSON) async throws -> JSON {
        guard let token = message.at("directive.payload.scope.token")?.string else {
            throw LWAFailure.refused("the directive has no scope token")
        }
        let customer = try await lwa.customer(accessToken: token)
        var endpoints: [JSON] = []
        for (unit, modelName) in try await store.units(of: customer) {
            guard let model = store.catalogue.models[modelName] else { continue }
            endpoints.append(
                AlexaMessage.endpoint(unit: unit, model: model, manufacturer: store.catalogue.manufacturer))
        }
        return AlexaMessage.discoverResponse(endpoints: endpoints)
    }

    /// `Alexa` `ReportState`: the unit's levels, when it is the customer's.
    func reportState(_ message: JSON, correlation: String?) async throws -> JSON {
        guard let unit = message.at("directive.endpoint.endpointId")?.string,
            let token = message.at("directive.endpoint.scope.token")?.string
        else { throw LWAFailure.refused("the directive has no endpoint or scope token") }
        let customer = try await lwa.customer(accessToken: token)
        guard let known = try await store.unit(unit), known.customer == customer, !known.revoked,
            let model = store.catalogue.models[known.model]
        else { throw CloudError(.notFound, "unit \(unit) is not one of this customer's") }
        let properties = try await store.levelProperties(unit: unit, model: model)
        let endpoint: JSON = [
            "endpointId": .string(unit), "scope": ["type": "BearerToken", "token": .string(token)],
        ]
        return AlexaMessage.stateReport(endpoint: endpoint, correlationToken: correlation, properties: properties)
    }

    /// `Alexa.Authorization` `AcceptGrant`: the grant's code exchanged with LWA for the customer's event-gateway
    /// tokens, kept for the event sender. A failure is ACCEPT_GRANT_FAILED, which Alexa shows the customer.
    func acceptGrant(_ message: JSON, now: Date) async -> JSON {
        guard let code = message.at("directive.payload.grant.code")?.string,
            let grantee = message.at("directive.payload.grantee.token")?.string
        else { return AlexaMessage.acceptGrantFailed("the directive has no grant code or grantee token") }
        do {
            let customer = try await lwa.customer(accessToken: grantee)
            let tokens = try await lwa.exchange(code: code)
            try await store.storeGrant(customer: customer, tokens: tokens, now: now)
            logger.info("grant accepted")
            return AlexaMessage.acceptGrantResponse()
        } catch {
            logger.warning("grant not accepted", metadata: ["error": "\(error)"])
            return AlexaMessage.acceptGrantFailed("the grant could not be exchanged with Login with Amazon")
        }
    }
}
