import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1

/// `replenish-companion claim`: claims a unit of program alexa for a customer in the maker's cloud, as the maker's
/// phone app does once the customer is signed in (the agent's docs/protocol.md, "Claiming a unit"): it proves the
/// label's key to the cloud, not to the unit, with an HMAC over the unit, the customer and a fresh nonce. The unit
/// learns of the claim from the cloud. Plain HTTP only, as the bench's emulator serves it: a phone app speaks to
/// the maker's cloud over HTTPS.
struct ClaimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "claim",
        abstract: "Claim a unit of program alexa for a customer in the maker's cloud (the emulator's, on the bench).")

    @OptionGroup var label: LabelOptions

    @Option(help: "The maker's cloud, such as http://127.0.0.1:8080 (the emulator).")
    var cloud: String

    @Option(help: "The customer's id in the maker's account system (1 to 128 characters).")
    var customer: String

    @Option(help: "The unit's id in the cloud (default: the label's serial).")
    var unit: String?

    func run() async throws {
        try await reportingFailures {
            let label = try self.label.label()
            let unit = self.unit ?? label.serial
            guard !customer.isEmpty, customer.count <= 128 else {
                throw Failure("--customer must be 1 to 128 characters")
            }
            let nonce = Label.randomHex(16)
            let proof = try label.hmac("replenish-claim-v1\n\(unit)\n\(customer)\n\(nonce)")
            struct Claim: Encodable {
                var unit, customer, nonce, proof: String
            }
            let body = try JSONEncoder().encode(Claim(unit: unit, customer: customer, nonce: nonce, proof: proof))
            var base = cloud
            while base.hasSuffix("/") { base.removeLast() }
            let answer = try await PlainHTTP.send(
                .POST, base + "/v1/claims", headers: [("Content-Type", "application/json")], body: Array(body),
                timeout: .seconds(20))
            struct Problem: Decodable { var message: String? }
            guard answer.status == 200 else {
                let message = (try? JSONDecoder().decode(Problem.self, from: Data(answer.body)))?.message
                throw Failure("the cloud refused the claim: \(answer.status)\(message.map { " \($0)" } ?? "")")
            }
            say("unit \(unit) claimed for \(customer)")
        }
    }
}
