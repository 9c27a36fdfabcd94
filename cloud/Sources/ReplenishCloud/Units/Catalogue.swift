import Foundation

/// The maker's models: what each unit of a model tells Alexa at discovery (its name, its supplies, and each
/// supply's sensor, measurement and Dash Replenishment id from Amazon's Dash console). A JSON file the maker
/// keeps with the service (`--catalogue`, `docs/cloud.md`).
public struct Catalogue: Sendable, Equatable {
    /// One supply of a model.
    public struct Slot: Sendable, Equatable {
        /// Which inventory sensor reports it: usage (`Alexa.InventoryUsageSensor`) or level
        /// (`Alexa.InventoryLevelSensor`).
        public enum Sensor: String, Sendable { case usage, level }
        public var slot: String
        public var sensor: Sensor
        /// `{"@type": "Count"}`, `{"@type": "Percentage"}` or `{"@type": "Weight", "unit": …}`.
        public var measurement: JSON
        public var dashReplenishmentId: String
        /// The supply's name as the customer sees it in the Alexa app.
        public var name: String

        /// The capability's instance: one name for this supply across every customer, as Amazon asks.
        public var instance: String {
            (sensor == .usage ? "InventoryUsageSensor-" : "InventoryLevelSensor-") + slot
        }
    }

    /// One model.
    public struct Model: Sendable, Equatable {
        public var friendlyName: String
        public var description: String
        public var slots: [Slot]
    }

    public var manufacturer: String
    public var models: [String: Model]

    public init(manufacturer: String, models: [String: Model]) {
        self.manufacturer = manufacturer
        self.models = models
    }

    /// Reads the catalogue's JSON, refusing it with the first wrong field named.
    public init(parsing json: JSON) throws(CloudError) {
        func refuse(_ text: String) -> CloudError { CloudError(.badConfig, "catalogue: \(text)") }
        guard let manufacturer = json["manufacturer"]?.string, !manufacturer.isEmpty else {
            throw refuse("manufacturer is required")
        }
        guard case .object(let entries)? = json["models"], !entries.isEmpty else {
            throw refuse("models must name at least one model")
        }
        var models: [String: Model] = [:]
        for (name, entry) in entries.sorted(by: { $0.key < $1.key }) {
            guard let friendlyName = entry["friendlyName"]?.string, !friendlyName.isEmpty,
                let description = entry["description"]?.string, !description.isEmpty,
                let slotList = entry["slots"]?.array, !slotList.isEmpty
            else { throw refuse("model \(name) needs friendlyName, description and slots") }
            var slots: [Slot] = []
            for (index, line) in slotList.enumerated() {
                let at = "model \(name) slots[\(index)]"
                guard let slot = line["slot"]?.string, !slot.isEmpty,
                    let sensor = line["sensor"]?.string.flatMap(Slot.Sensor.init(rawValue:)),
                    let measurement = line["measurement"], let type = measurement["@type"]?.string,
                    let dashId = line["dashReplenishmentId"]?.string, !dashId.isEmpty,
                    let slotName = line["name"]?.string, !slotName.isEmpty
                else {
                    throw refuse("\(at) needs slot, sensor (usage or level), measurement, dashReplenishmentId, name")
                }
                let allowed = sensor == .usage ? ["Count", "Weight"] : ["Count", "Percentage", "Weight"]
                guard allowed.contains(type) else {
                    throw refuse("\(at).measurement: \(type) is not a \(sensor) measurement")
                }
                if type == "Weight" {
                    guard let unit = measurement["unit"]?.string, UnitReport.weightUnits.contains(unit) else {
                        throw refuse(
                            "\(at).measurement.unit must be one of \(UnitReport.weightUnits.joined(separator: ", "))")
                    }
                }
                guard !slots.contains(where: { $0.slot == slot }) else { throw refuse("\(at): slot \(slot) twice") }
                slots.append(
                    Slot(
                        slot: slot, sensor: sensor, measurement: measurement, dashReplenishmentId: dashId,
                        name: slotName))
            }
            models[name] = Model(friendlyName: friendlyName, description: description, slots: slots)
        }
        self.manufacturer = manufacturer
        self.models = models
    }

    /// Reads the catalogue file.
    public static func load(path: String) throws -> Catalogue {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CloudError(.badConfig, "catalogue: \(path) cannot be read")
        }
        let json: JSON
        do { json = try JSON.parse(data) } catch { throw CloudError(.badConfig, "catalogue: \(path) is not JSON") }
        return try Catalogue(parsing: json)
    }
}
