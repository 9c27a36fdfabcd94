/// An optional that a synthesized `Encodable` writes as JSON `null` when absent, instead of leaving the key out:
/// for keys docs/commands.md promises are always there (`status --json`'s `pid`, `pairingWindow.closesAt`, a slot's
/// `subscribed` and `lastResult`, an order's `status` and `checkedAt`).
// swift-format-ignore: UseSynthesizedInitializer
@propertyWrapper
struct NullWhenAbsent<Value: Encodable & Equatable & Sendable>: Encodable, Sendable {
    var wrappedValue: Value?

    // Written out (the lint rule is off for this type): the memberwise initializer of a type that uses the wrapper
    // (`status: String?`) needs a declared `init(wrappedValue:)`; the synthesized one does not count.
    init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue { try container.encode(wrappedValue) } else { try container.encodeNil() }
    }
}
