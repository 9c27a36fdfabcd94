/// Who a device is, as the companion told LWA in `scope_data` when the customer consented.
struct DeviceIdentity: Sendable, Equatable, Codable {
    var serial: String
    var model: String
    var isTestDevice: Bool
    var shouldIncludeNonLive: Bool
    /// The LWA client id the device was authorized with; a refresh must present the same one.
    var clientId: String

    /// The key that ties tokens, orders and deregistration to one device.
    var key: String { "\(model)/\(serial)" }
}
