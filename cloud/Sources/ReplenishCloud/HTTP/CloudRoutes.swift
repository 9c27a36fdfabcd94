import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// How the service learns which unit calls: the TLS terminator in front checks the unit's certificate (mutual
/// TLS) and passes its subject on.
public enum UnitIdentity: String, Sendable, CaseIterable {
    /// `X-Amzn-Mtls-Clientcert-Subject`, as an Application Load Balancer in mTLS verify mode (or nginx, as the
    /// tests run it) passes it.
    case header
    /// API Gateway's mutual TLS, through the Lambda Web Adapter: the subject in `x-amzn-request-context`'s
    /// `authentication.clientCert.subjectDN`.
    case lambdaRequestContext = "lambda-request-context"
}

/// The service's HTTP routes: the units' calls, the customers' claims, Alexa's directives and the schedule.
public struct CloudRoutes: Sendable {
    let store: CloudStore
    let directives: DirectiveHandler
    let sender: EventSender
    let lwa: any LoginWithAmazon
    let identity: UnitIdentity
    let eventsPath: String
    let now: @Sendable () -> Date
    let logger: Logger

    public init(
        store: CloudStore, directives: DirectiveHandler, sender: EventSender, lwa: any LoginWithAmazon,
        identity: UnitIdentity, eventsPath: String = "/events", now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger
    ) {
        self.store = store
        self.directives = directives
        self.sender = sender
        self.lwa = lwa
        self.identity = identity
        self.eventsPath = eventsPath
        self.now = now
        self.logger = logger
    }

    public func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/health") { _, _ in
            Self.json(.ok, ["status": "ok", "schemaVersion": .number(Double(Migrations.current))])
        }
        router.post("/v1/units/{unit}/reports") { request, context in
            try await handle { try await report(request, context: context) }
        }
        router.get("/v1/units/{unit}") { request, context in
            try await handle {
                let unit = try context.parameters.require("unit")
                let known = try await callingUnit(request, unit: unit)
                return Self.json(.ok, ["unit": .string(unit), "claimed": .bool(known.customer != nil)])
            }
        }
        router.post("/v1/claims") { request, context in try await handle { try await claim(request) } }
        router.delete("/v1/units/{unit}/claim") { request, context in
            try await handle {
                let unit = try context.parameters.require("unit")
                guard let bearer = request.headers[.authorization], bearer.hasPrefix("Bearer ") else {
                    throw CloudError(.unauthorized, "the customer's account-linking token is required")
                }
                let customer: String
                do { customer = try await lwa.customer(accessToken: String(bearer.dropFirst(7))) } catch {
                    throw CloudError(.unauthorized, "the account-linking token is not valid")
                }
                try await store.release(unit: unit, customer: customer, now: now())
                _ = try? await sender.sendDue(now: now, batches: 1)
                return Self.json(.ok, ["unit": .string(unit), "claimed": false])
            }
        }
        router.post(RouterPath(eventsPath)) { request, context in
            try await handle { try await event(request) }
        }
        return router
    }

    /// Runs a route, turning its refusal into the answer the protocol gives (`{"message": …}`).
    func handle(_ body: () async throws -> Response) async throws -> Response {
        do {
            return try await body()
        } catch let error as CloudError {
            let status: HTTPResponse.Status =
                switch error.code {
                case .badRequest: .badRequest
                case .forbidden: .forbidden
                case .notFound: .notFound
                case .conflict: .conflict
                case .unauthorized: .unauthorized
                default: .internalServerError
                }
            return Self.json(status, ["message": .string(error.message)])
        } catch {
            logger.error("request failed", metadata: ["error": "\(type(of: error))"])
            return Self.json(.serviceUnavailable, ["message": "the service could not answer: try again later"])
        }
    }

    /// The unit a call comes from: the certificate's CN, which must be the path's unit.
    func callingUnit(_ request: Request, unit: String) async throws -> CloudStore.UnitRecord {
        let subject: String?
        switch identity {
        case .header:
            subject = HTTPField.Name("X-Amzn-Mtls-Clientcert-Subject").flatMap { request.headers[$0] }
        case .lambdaRequestContext:
            subject =
                HTTPField.Name("x-amzn-request-context").flatMap { request.headers[$0] }
                .flatMap { try? JSON.parse($0) }?.at("authentication.clientCert.subjectDN")?.string
        }
        guard let subject, !subject.isEmpty else {
            throw CloudError(.unauthorized, "no client certificate: a unit's calls come over mutual TLS")
        }
        let commonName = subject.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .first { $0.hasPrefix("CN=") }.map { String($0.dropFirst(3)) }
        guard commonName == unit else { throw CloudError(.forbidden, "the certificate is not unit \(unit)'s") }
        guard let known = try await store.unit(unit) else {
            throw CloudError(.notFound, "unit \(unit) is not registered")
        }
        guard !known.revoked else { throw CloudError(.forbidden, "unit \(unit)'s certificate is revoked") }
        return known
    }

    func report(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let unit = try context.parameters.require("unit")
        _ = try await callingUnit(request, unit: unit)
        guard
            request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces)
                == "application/json"
        else { throw CloudError(.badRequest, "Content-Type must be application/json") }
        let report = try UnitReport(parsing: try await body(request), unit: unit)
        let acknowledgement = try await store.apply(report, receivedAt: now())
        if acknowledgement.applied {
            // Sent now when the gateway answers; the schedule sends what is left.
            _ = try? await sender.sendDue(now: now, batches: 1)
        }
        return Self.json(
            .ok, ["acknowledged": .number(Double(acknowledgement.sequence)), "claimed": .bool(acknowledgement.claimed)])
    }

    func claim(_ request: Request) async throws -> Response {
        let body = try await body(request)
        guard let unit = body["unit"]?.string, let customer = body["customer"]?.string, !customer.isEmpty,
            customer.utf8.count <= 128, let nonce = body["nonce"]?.string, nonce.utf8.count == 32,
            ClaimProof.bytes(hex: nonce.lowercased()) != nil, let proof = body["proof"]?.string
        else {
            throw CloudError(
                .badRequest, "a claim needs unit, customer (1 to 128 characters), nonce (32 hex digits) and proof")
        }
        _ = try await store.claim(unit: unit, customer: customer, nonce: nonce, proof: proof, now: now())
        _ = try? await sender.sendDue(now: now, batches: 1)
        return Self.json(.ok, ["unit": .string(unit), "customer": .string(customer), "claimed": true])
    }

    /// What Lambda hands over through the Web Adapter's pass-through path: an Alexa directive, or the
    /// schedule's event (EventBridge), which queues the daily update and sends what is due.
    func event(_ request: Request) async throws -> Response {
        // Behind the Web Adapter only the pass-through reaches this path: an HTTP request through the function
        // URL or API Gateway carries its request context, and is refused as a path that does not exist.
        if identity == .lambdaRequestContext,
            HTTPField.Name("x-amzn-request-context").flatMap({ request.headers[$0] }) != nil
        {
            throw CloudError(.notFound, "no such path")
        }
        let body = try await body(request)
        if body["directive"] != nil {
            return Self.json(.ok, await directives.answer(body, now: now()))
        }
        if body["source"]?.string == "aws.events" || body["detail-type"]?.string == "Scheduled Event" {
            let updated = try await store.queueDailyUpdate(now: now())
            // Bounded as a Lambda invocation is: what is left goes at the next run.
            let pass = try await sender.sendDue(now: now, batches: 20)
            return Self.json(
                .ok,
                [
                    "dailyUpdates": .number(Double(updated)), "sent": .number(Double(pass.sent)),
                    "retried": .number(Double(pass.retried)), "dropped": .number(Double(pass.dropped)),
                ])
        }
        throw CloudError(.badRequest, "neither an Alexa directive nor a scheduled event")
    }

    func body(_ request: Request) async throws -> JSON {
        var request = request
        let bytes = try await request.collectBody(upTo: 256 * 1024)
        guard let json = try? JSON.parse(bytes.readableBytesView) else {
            throw CloudError(.badRequest, "the body is not JSON")
        }
        return json
    }

    static func json(_ status: HTTPResponse.Status, _ value: JSON) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: value.text)))
    }
}
