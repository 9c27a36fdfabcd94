/// The example config's placeholders: a value still at one is a problem naming its key and where the real value
/// comes from, so the untouched example (what the Debian package installs) never passes `check-config` and never
/// runs. A unit that ran with the example's client id or model could never pair; one with the example's slot
/// could never order.
///
/// A placeholder is any value containing `REPLACE` (every placeholder of `config/agent.example.json` says
/// `REPLACE-WITH-…`), or one of the example's values from before it had the marker (an `agent.json` copied from
/// an older package). The example's serial of old, `SN0001`, is not among them: it is a well-formed serial that
/// tests and demos use on purpose.
extension AgentConfig {
    /// The marker every placeholder of the shipped example carries.
    static let placeholderMarker = "REPLACE"

    /// A key whose example value is a placeholder, and where its real value comes from.
    enum PlaceholderKey: Sendable, CaseIterable {
        case serial, model, clientId, clientSecret, slot

        /// The example's values before they carried the marker (up to 0.x of the package).
        var formerPlaceholders: Set<String> {
            switch self {
            case .serial: []
            case .model: ["5f4f1c5e-1234-4abc-9def-0123456789ab"]
            case .clientId: ["amzn1.application-oa2-client.0123456789abcdef"]
            case .clientSecret: ["only-if-your-security-profile-has-one"]
            case .slot: ["0b4f6c1e-5a2d-4c3b-9e8f-7a6b5c4d3e2f"]
            }
        }

        /// Where the real value comes from. Never quotes the value (one of them is the client secret).
        var advice: String {
            switch self {
            case .serial:
                "still the example's placeholder; give each unit its own serial (1 to 50 of A-Z a-z 0-9): here in a config per unit, or with device.serialFile (a file the factory writes on each unit) or device.serialSource \"device-tree\" (the board's serial number) instead of device.serial"
            case .model:
                "still the example's placeholder; use your device model's id from the Dash Replenishment console (developer.amazon.com: Dash Replenishment Service, your device's model)"
            case .clientId:
                "still the example's placeholder; use the client id of your Login with Amazon security profile (developer.amazon.com: Login with Amazon, the profile's web settings, amzn1.application-oa2-client.…)"
            case .clientSecret:
                "still the example's placeholder; use the client secret of the same LWA security profile, or remove the key if the device does not send one"
            case .slot:
                "still the example's placeholder; use the slot id of this button's slot from your device model in the DRS console"
            }
        }
    }

    /// Whether `value` of `key` is still a placeholder of the example.
    static func isPlaceholder(_ value: String, for key: PlaceholderKey) -> Bool {
        value.containsText(placeholderMarker) || key.formerPlaceholders.contains(value)
    }

    /// Records one problem for each value still at a placeholder; `values` are key paths and their kinds.
    static func placeholderProblems(
        _ values: [(path: String, key: PlaceholderKey, value: String?)], problems: inout Problems
    ) {
        for (path, key, value) in values {
            if let value, isPlaceholder(value, for: key) { problems.add(path, key.advice) }
        }
    }
}
