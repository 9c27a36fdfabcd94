/// `outbox.json`'s format version (see `StateFormat` for the rule). Version 1: `entries` of `slot`,
/// `pressedAt`, `attempts` and `parkedReason`.
extension Outbox: StateFormat {
    static let formatVersion = 1
}
