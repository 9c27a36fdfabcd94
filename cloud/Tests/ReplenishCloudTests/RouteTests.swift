import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing

@testable import ReplenishCloud

/// The HTTP routes as a unit, the phone and Lambda call them, on Hummingbird's test client.
@Suite(.serialized) struct RouteTests {
    static let now = Date(timeIntervalSince1970: 1_795_000_000)
    static let subject = HTTPField.Name("X-Amzn-Mtls-Clientcert-Subject")!

    static func app(_ store: CloudStore, identity: UnitIdentity = .header) -> some ApplicationProtocol {
        let lwa = FakeLWA()
        let sender = EventSender(store: store, gateway: FakeGateway(), lwa: lwa, logger: TestDatabase.logger)
        let routes = CloudRoutes(
            store: store, directives: DirectiveHandler(store: store, lwa: lwa, logger: TestDatabase.logger),
            sender: sender,
            lwa: lwa, identity: identity, now: { now }, logger: TestDatabase.logger)
        return Application(router: routes.router())
    }

    @Test func aUnitsReportNeedsItsOwnCertificateAndIsAcknowledged() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            _ = try await store.register(unit: Fixtures.unit, setupKey: Fixtures.key, model: "coffee-1")
            let body = ByteBuffer(string: Fixtures.report(sequence: 3, usage: 1).text)
            let path = "/v1/units/\(Fixtures.unit)/reports"
            try await Self.app(store).test(.router) { client in
                var response = try await client.execute(
                    uri: path, method: .post, headers: [.contentType: "application/json"], body: body)
                #expect(response.status == .unauthorized)
                response = try await client.execute(
                    uri: path, method: .post,
                    headers: [.contentType: "application/json", Self.subject: "CN=TEST0002,O=Maker"],
                    body: body)
                #expect(response.status == .forbidden)
                response = try await client.execute(
                    uri: path, method: .post,
                    headers: [.contentType: "application/json", Self.subject: "CN=TEST0001,O=Maker"],
                    body: ByteBuffer(string: "{\"unit\":\"TEST0001\"}"))
                #expect(response.status == .badRequest)
                #expect(String(buffer: response.body).contains("stream"))
                for _ in 0..<2 {
                    response = try await client.execute(
                        uri: path, method: .post,
                        headers: [.contentType: "application/json", Self.subject: "CN=TEST0001,O=Maker"],
                        body: body)
                    #expect(response.status == .ok)
                    #expect(try JSON.parse(response.body.readableBytesView) == ["acknowledged": 3, "claimed": false])
                }
            }
            #expect(try await clients[0].query("SELECT count(*) FROM reports").decode(Int.self).reduce(0, +) == 1)
        }
    }

    @Test func behindAPIGatewayTheSubjectComesFromTheRequestContext() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            _ = try await store.register(unit: Fixtures.unit, setupKey: Fixtures.key, model: "coffee-1")
            let context = HTTPField.Name("x-amzn-request-context")!
            try await Self.app(store, identity: .lambdaRequestContext).test(.router) { client in
                // The header a load balancer would set is not trusted in this mode.
                var response = try await client.execute(
                    uri: "/v1/units/TEST0001", method: .get, headers: [Self.subject: "CN=TEST0001"])
                #expect(response.status == .unauthorized)
                response = try await client.execute(
                    uri: "/v1/units/TEST0001", method: .get,
                    headers: [context: #"{"authentication":{"clientCert":{"subjectDN":"CN=TEST0001,O=Maker"}}}"#])
                #expect(response.status == .ok)
                #expect(try JSON.parse(response.body.readableBytesView) == ["unit": "TEST0001", "claimed": false])
                // The pass-through path answers Lambda's own hand-over only, not an HTTP request.
                response = try await client.execute(
                    uri: "/events", method: .post, headers: [context: #"{"http":{"method":"POST"}}"#],
                    body: ByteBuffer(string: #"{"source":"aws.events","detail-type":"Scheduled Event"}"#))
                #expect(response.status == .notFound)
                response = try await client.execute(
                    uri: "/events", method: .post,
                    body: ByteBuffer(string: #"{"source":"aws.events","detail-type":"Scheduled Event"}"#))
                #expect(response.status == .ok)
            }
        }
    }

    @Test func aClaimAndADirectiveThroughThePassThroughPath() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            _ = try await store.register(unit: Fixtures.unit, setupKey: Fixtures.key, model: "coffee-1")
            let (nonce, proof) = Fixtures.claim()
            let claim: JSON = [
                "unit": .string(Fixtures.unit), "customer": .string(Fixtures.customer), "nonce": .string(nonce),
                "proof": .string(proof),
            ]
            try await Self.app(store).test(.router) { client in
                var response = try await client.execute(
                    uri: "/v1/claims", method: .post, body: ByteBuffer(string: claim.text))
                #expect(response.status == .ok)
                response = try await client.execute(uri: "/v1/claims", method: .post, body: ByteBuffer(string: "{}"))
                #expect(response.status == .badRequest)
                let discover = DirectiveTests.directive(
                    "Alexa.Discovery", "Discover", payload: ["scope": ["type": "BearerToken", "token": "link-token-1"]])
                response = try await client.execute(
                    uri: "/events", method: .post, body: ByteBuffer(string: discover.text))
                #expect(response.status == .ok)
                let answer = try JSON.parse(response.body.readableBytesView)
                #expect(answer.at("event.payload.endpoints")?.array?.count == 1)
                response = try await client.execute(
                    uri: "/events", method: .post,
                    body: ByteBuffer(string: #"{"source":"aws.events","detail-type":"Scheduled Event"}"#))
                #expect(response.status == .ok)
                response = try await client.execute(uri: "/events", method: .post, body: ByteBuffer(string: "[1]"))
                #expect(response.status == .badRequest)
            }
        }
    }
}
