import Foundation
import PostgresNIO
import Testing

@testable import ReplenishCloud

/// The skill's directives (Discovery, ReportState, AcceptGrant) and the schedule's daily update.
@Suite(.serialized) struct DirectiveTests {
    static let now = Date(timeIntervalSince1970: 1_795_000_000)

    static func directive(_ namespace: String, _ name: String, endpoint: JSON? = nil, payload: JSON = [:]) -> JSON {
        var directive: [String: JSON] = [
            "header": [
                "namespace": .string(namespace), "name": .string(name), "payloadVersion": "3",
                "messageId": "m-1", "correlationToken": "c-1",
            ],
            "payload": payload,
        ]
        if let endpoint { directive["endpoint"] = endpoint }
        return ["directive": .object(directive)]
    }

    static func answer(_ store: CloudStore, _ lwa: FakeLWA, _ message: JSON) async -> JSON {
        let answer = await DirectiveHandler(store: store, lwa: lwa, logger: TestDatabase.logger).answer(
            message, now: now)
        MessageLog.record(answer, answer.at("event.header.name")?.string ?? "answer")
        return answer
    }

    @Test func discoveryListsTheCustomersUnitsWithTheirSupplies() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            try await ReportTests.boundUnit(store)
            let answer = await Self.answer(
                store, FakeLWA(),
                Self.directive(
                    "Alexa.Discovery", "Discover", payload: ["scope": ["type": "BearerToken", "token": "link-token-1"]])
            )
            #expect(answer.at("event.header.name") == "Discover.Response")
            let endpoints = try #require(answer.at("event.payload.endpoints")?.array)
            #expect(endpoints.map { $0["endpointId"] } == [.string(Fixtures.unit)])
            let usage = try #require(
                endpoints[0]["capabilities"]?.array?.first { $0["interface"] == "Alexa.InventoryUsageSensor" })
            #expect(usage.at("configuration.replenishment.value") == "amzn1.dash.v2.o.ci.pods")
            // Another customer's discovery finds nothing of this customer's.
            let lwa = FakeLWA()
            lwa.state.withLock { $0.customers["link-token-2"] = "amzn1.account.OTHER" }
            let other = await Self.answer(
                store, lwa,
                Self.directive(
                    "Alexa.Discovery", "Discover", payload: ["scope": ["type": "BearerToken", "token": "link-token-2"]])
            )
            #expect(other.at("event.payload.endpoints") == [])
        }
    }

    @Test func reportStateAnswersTheLevelsOfTheCustomersUnitOnly() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            try await ReportTests.boundUnit(store)
            _ = try await store.apply(
                try UnitReport(parsing: Fixtures.report(sequence: 1, level: 25), unit: Fixtures.unit),
                receivedAt: Self.now)
            let endpoint: JSON = [
                "endpointId": .string(Fixtures.unit), "scope": ["type": "BearerToken", "token": "link-token-1"],
            ]
            let answer = await Self.answer(store, FakeLWA(), Self.directive("Alexa", "ReportState", endpoint: endpoint))
            #expect(answer.at("event.header.name") == "StateReport")
            #expect(answer.at("event.header.correlationToken") == "c-1")
            #expect(answer.at("context.properties")?.array?.first?["value"] == ["@type": "Percentage", "value": 25])
            let lwa = FakeLWA()
            lwa.state.withLock { $0.customers["link-token-2"] = "amzn1.account.OTHER" }
            let foreign: JSON = [
                "endpointId": .string(Fixtures.unit), "scope": ["type": "BearerToken", "token": "link-token-2"],
            ]
            let refused = await Self.answer(store, lwa, Self.directive("Alexa", "ReportState", endpoint: foreign))
            #expect(refused.at("event.payload.type") == "NO_SUCH_ENDPOINT")
            let stranger: JSON = [
                "endpointId": .string(Fixtures.unit), "scope": ["type": "BearerToken", "token": "nobody"],
            ]
            let unknown = await Self.answer(
                store, FakeLWA(), Self.directive("Alexa", "ReportState", endpoint: stranger))
            #expect(unknown.at("event.payload.type") == "INVALID_AUTHORIZATION_CREDENTIAL")
        }
    }

    @Test func acceptGrantStoresTheCustomersTokensOrFailsAsAlexaExpects() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            let grant: JSON = [
                "grant": ["type": "OAuth2.AuthorizationCode", "code": "grant-code-1"],
                "grantee": ["type": "BearerToken", "token": "link-token-1"],
            ]
            let lwa = FakeLWA()
            let answer = await Self.answer(
                store, lwa, Self.directive("Alexa.Authorization", "AcceptGrant", payload: grant))
            #expect(answer.at("event.header.name") == "AcceptGrant.Response")
            let stored = try await clients[0].query("SELECT customer, access_token FROM grants").decode(
                (String, String).self
            )
            .reduce(into: [String]()) { $0.append("\($1.0) \($1.1)") }
            #expect(stored == ["\(Fixtures.customer) gw-access-1"])
            // The code was used: a second AcceptGrant with it fails.
            let again = await Self.answer(
                store, lwa, Self.directive("Alexa.Authorization", "AcceptGrant", payload: grant))
            #expect(again.at("event.header.name") == "ErrorResponse")
            #expect(again.at("event.payload.type") == "ACCEPT_GRANT_FAILED")
        }
    }

    @Test func anUnknownDirectiveGetsAnErrorResponse() async throws {
        try await TestDatabase.with { clients in
            let answer = await Self.answer(
                TestDatabase.store(clients[0]), FakeLWA(), Self.directive("Alexa.PowerController", "TurnOn"))
            #expect(answer.at("event.payload.type") == "INVALID_DIRECTIVE")
            #expect(answer.at("event.header.correlationToken") == "c-1")
        }
    }

    @Test func theDailyUpdateIsQueuedOnceADayHoweverManyCopiesRunTheSchedule() async throws {
        try await TestDatabase.with(copies: 2) { clients in
            let stores = clients.map(TestDatabase.store)
            try await ReportTests.boundUnit(stores[0])
            _ = try await stores[0].apply(
                try UnitReport(parsing: Fixtures.report(sequence: 1, level: 60), unit: Fixtures.unit),
                receivedAt: Self.now)
            let counts = try await withThrowingTaskGroup(of: Int.self) { group in
                for store in stores { group.addTask { try await store.queueDailyUpdate(now: Self.now) } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(counts.sorted() == [0, 1])
            #expect(try await stores[1].queueDailyUpdate(now: Self.now.addingTimeInterval(86_400)) == 1)
        }
    }
}
