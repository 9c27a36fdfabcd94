import Crypto
import Foundation

/// The proof a customer's phone makes with the label's setup key when it claims a unit (the agent's
/// docs/protocol.md, "Claiming a unit"): HMAC-SHA256(key, "replenish-claim-v1\n" + unit + "\n" + customer +
/// "\n" + nonce), lowercase hex.
public struct ClaimProof {
    let key: SymmetricKey

    /// `keyHex`: the 16-byte key the factory registered, as 32 lowercase hex digits.
    public init?(keyHex: String) {
        guard let bytes = Self.bytes(hex: keyHex), bytes.count == 16 else { return nil }
        key = SymmetricKey(data: bytes)
    }

    public func proof(unit: String, customer: String, nonce: String) -> String {
        let message = "replenish-claim-v1\n\(unit)\n\(customer)\n\(nonce)"
        let code = HMAC<SHA256>.authenticationCode(for: Data(message.utf8), using: key)
        return code.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }

    /// Whether `proof` is this key's proof of the claim; compared by Crypto's constant-time check.
    public func verifies(_ proof: String, unit: String, customer: String, nonce: String) -> Bool {
        guard let bytes = Self.bytes(hex: proof), bytes.count == 32 else { return false }
        let message = "replenish-claim-v1\n\(unit)\n\(customer)\n\(nonce)"
        return HMAC<SHA256>.isValidAuthenticationCode(bytes, authenticating: Data(message.utf8), using: key)
    }

    static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case 0x30...0x39: digit - 0x30
        case 0x61...0x66: digit - 0x61 + 10
        default: nil
        }
    }
}

extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
