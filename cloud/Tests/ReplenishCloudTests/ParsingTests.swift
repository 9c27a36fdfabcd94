import Foundation
import Testing

@testable import ReplenishCloud

/// What the service refuses before it touches the database: reports, catalogues and times.
@Suite struct ParsingTests {
    @Test(arguments: [
        (#"{"unit":"TEST0002","stream":"9f2c4e1d0a7b3c58","sequence":1,"daily":false,"supplies":[]}"#, "unit must be"),
        (#"{"unit":"TEST0001","stream":"9F2C4E1D0A7B3C58","sequence":1,"daily":false,"supplies":[]}"#, "stream"),
        (#"{"unit":"TEST0001","stream":"9f2c4e1d0a7b3c58","sequence":0,"daily":false,"supplies":[]}"#, "sequence"),
        (#"{"unit":"TEST0001","stream":"9f2c4e1d0a7b3c58","sequence":1.5,"daily":false,"supplies":[]}"#, "sequence"),
        (
            #"{"unit":"TEST0001","stream":"9f2c4e1d0a7b3c58","sequence":1,"daily":false,"supplies":[]}"#,
            "must not be empty"
        ),
        (
            #"{"unit":"TEST0001","stream":"9f2c4e1d0a7b3c58","sequence":1,"daily":false,"supplies":[{"slot":"pods","usage":{"@type":"Count","value":0}}]}"#,
            "usage must be a Count"
        ),
        (
            #"{"unit":"TEST0001","stream":"9f2c4e1d0a7b3c58","sequence":1,"daily":false,"supplies":[{"slot":"t","level":{"@type":"Percentage","value":101}}]}"#,
            "Percentage"
        ),
        (
            #"{"unit":"TEST0001","stream":"9f2c4e1d0a7b3c58","sequence":1,"daily":false,"supplies":[{"slot":"t","level":{"@type":"Weight","value":1,"unit":"STONE"}}]}"#,
            "unit must be one of"
        ),
        (
            #"{"unit":"TEST0001","stream":"9f2c4e1d0a7b3c58","sequence":1,"daily":false,"madeAt":"2026-11-29 10:00","supplies":[{"slot":"t","level":{"@type":"Count","value":1}}]}"#,
            "madeAt"
        ),
        (
            #"{"unit":"TEST0001","stream":"9f2c4e1d0a7b3c58","sequence":1,"daily":false,"supplies":[{"slot":"t","usage":{"@type":"Count","value":1},"level":{"@type":"Count","value":1}}]}"#,
            "one of usage and level"
        ),
    ])
    func aWrongReportIsRefusedNamingItsField(text: String, expected: String) throws {
        let error = #expect(throws: CloudError.self) { try UnitReport(parsing: try JSON.parse(text), unit: "TEST0001") }
        #expect(error?.code == .badRequest)
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
    }

    @Test func aWellFormedReportIsRead() throws {
        let report = try UnitReport(parsing: Fixtures.report(sequence: 17, usage: 3, level: 10), unit: Fixtures.unit)
        #expect(report.sequence == 17)
        #expect(report.supplies.map(\.usage) == [3, nil])
        #expect(report.supplies[1].level == ["@type": "Percentage", "value": 10])
    }

    @Test func aCatalogueWithAWrongSlotIsRefused() throws {
        let wrong: JSON = [
            "manufacturer": "M",
            "models": [
                "m": [
                    "friendlyName": "F", "description": "D",
                    "slots": [
                        [
                            "slot": "pods", "sensor": "usage", "measurement": ["@type": "Percentage"],
                            "dashReplenishmentId": "x", "name": "Pods",
                        ]
                    ],
                ]
            ],
        ]
        let error = #expect(throws: CloudError.self) { try Catalogue(parsing: wrong) }
        #expect(error?.message.contains("is not a usage measurement") == true)
    }

    @Test func theShippedExampleCatalogueIsRead() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../deploy/catalogue.example.json"
        ).standardizedFileURL.path
        let catalogue = try Catalogue.load(path: path)
        #expect(
            catalogue.models["coffee-1"]?.slots.map(\.instance) == [
                "InventoryUsageSensor-pods", "InventoryLevelSensor-tank",
            ])
    }

    @Test func timesAreWrittenAndCheckedAsAlexaTakesThem() {
        #expect(Timestamp.string(.init(timeIntervalSince1970: 1_795_000_000.25)) == "2026-11-18T11:06:40.250Z")
        #expect(Timestamp.isValid("2026-11-29T10:00:00Z"))
        #expect(Timestamp.isValid("2026-11-29T10:00:00.5Z"))
        #expect(!Timestamp.isValid("2026-11-29T10:00:00.1234Z"))
        #expect(!Timestamp.isValid("2026-11-29T10:00:00+01:00"))
        #expect(!Timestamp.isValid("2026-13-29T10:00:00Z"))
    }

    @Test func theDatabaseURLsTLSModesAreLibpqs() throws {
        #expect(throws: Never.self) { try CloudSettings.database(url: "postgres://u@h/d?sslmode=disable") }
        #expect(throws: Never.self) { try CloudSettings.database(url: "postgres://u@h/d?sslmode=require") }
        #expect(throws: Never.self) {
            try CloudSettings.database(url: "postgres://u@h/d?sslmode=verify-full&sslrootcert=/tmp/ca.pem")
        }
        let error = #expect(throws: CloudError.self) {
            try CloudSettings.database(url: "postgres://u@h/d?sslmode=prefer")
        }
        #expect(error?.code == .badConfig)
        #expect(throws: CloudError.self) { try CloudSettings.database(url: "mysql://u@h/d") }
    }

    @Test func aClaimProofIsTheLabelKeysHMAC() throws {
        let key = try #require(ClaimProof(keyHex: Fixtures.key))
        let proof = key.proof(unit: "TEST0001", customer: "customer-1", nonce: "0f1e2d3c4b5a69788796a5b4c3d2e1f0")
        #expect(proof.count == 64)
        #expect(
            key.verifies(proof, unit: "TEST0001", customer: "customer-1", nonce: "0f1e2d3c4b5a69788796a5b4c3d2e1f0"))
        #expect(
            !key.verifies(proof, unit: "TEST0001", customer: "customer-2", nonce: "0f1e2d3c4b5a69788796a5b4c3d2e1f0"))
        #expect(ClaimProof(keyHex: "0011") == nil)
    }
}
