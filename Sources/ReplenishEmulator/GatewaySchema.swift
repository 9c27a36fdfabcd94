import Foundation

/// The event gateway's check of an event's shape: the events a smart home skill sends about supplies
/// (ChangeReport, InventoryConsumed, AddOrUpdateReport, DeleteReport), written from Amazon's message schema
/// (`alexa_smart_home_message_schema.json`, draft 4) and, where it has no entry (InventoryConsumed, DeleteReport,
/// the InventoryUsageSensor capability), from Amazon's interface pages. It names the first thing wrong. The
/// emulator shares no code with the skill's service; the cloud's tests check the same events against Amazon's
/// schema itself (scripts/alexa-schema-check.py).
enum GatewaySchema {
    static let headerKeys: Set<String> = [
        "namespace", "name", "payloadVersion", "messageId", "correlationToken", "instance",
    ]
    static let weightUnits: Set<String> = [
        "KILOGRAM", "GRAM", "MILLIGRAM", "MICROGRAM", "METRIC_POUND", "POUND", "OUNCE", "DRAM",
    ]

    /// What is wrong with `event`, or nil. `token`: the bearer token, which the event's scope must carry.
    static func problem(_ event: JSONValue, token: String) -> String? {
        guard let root = keys(event), root.isSubset(of: ["event", "context"]), let body = event["event"],
            let header = body["header"]
        else { return "an event is {\"event\": {\"header\", …}}, with an optional context" }
        guard let headerKeys = keys(header), headerKeys.isSubset(of: Self.headerKeys) else {
            return "event.header has a field Alexa does not know"
        }
        guard header["payloadVersion"]?.stringValue == "3" else { return "event.header.payloadVersion must be \"3\"" }
        guard let id = header["messageId"]?.stringValue, (1...127).contains(id.utf8.count) else {
            return "event.header.messageId must be 1 to 127 characters"
        }
        let kind = "\(header["namespace"]?.stringValue ?? "").\(header["name"]?.stringValue ?? "")"
        switch kind {
        case "Alexa.ChangeReport": return changeReport(body, token: token)
        case "Alexa.InventoryUsageSensor.InventoryConsumed": return inventoryConsumed(body, token: token)
        case "Alexa.Discovery.AddOrUpdateReport": return discovery(body, token: token, add: true)
        case "Alexa.Discovery.DeleteReport": return discovery(body, token: token, add: false)
        default: return "\(kind) is not an event this gateway takes from a supplies skill"
        }
    }

    static func keys(_ value: JSONValue) -> Set<String>? {
        guard case .object(let members) = value else { return nil }
        return Set(members.map(\.key))
    }

    static func scopeProblem(_ scope: JSONValue?, token: String, at path: String) -> String? {
        guard let scope, keys(scope) == ["type", "token"], scope["type"]?.stringValue == "BearerToken" else {
            return "\(path) must be {\"type\": \"BearerToken\", \"token\"}"
        }
        return scope["token"]?.stringValue == token ? nil : "\(path).token is not the request's bearer token"
    }

    static func endpointProblem(_ endpoint: JSONValue?, token: String) -> String? {
        guard let endpoint, let names = keys(endpoint), names.isSubset(of: ["scope", "endpointId", "cookie"]) else {
            return "event.endpoint must be an object of scope and endpointId"
        }
        guard let id = endpoint["endpointId"]?.stringValue, isEndpointId(id) else {
            return "event.endpoint.endpointId must be 1 to 256 characters of [a-zA-Z0-9_-=#;:?@&]"
        }
        return scopeProblem(endpoint["scope"], token: token, at: "event.endpoint.scope")
    }

    static func isEndpointId(_ id: String) -> Bool {
        id.wholeMatch(of: /[a-zA-Z0-9_\-=#;:?@&]{1,256}/) != nil
    }

    static func isTime(_ text: String?) -> Bool {
        guard let text else { return false }
        return text.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z/) != nil
    }

    static func changeReport(_ body: JSONValue, token: String) -> String? {
        if let problem = endpointProblem(body["endpoint"], token: token) { return problem }
        guard let change = body["payload"]?["change"], let cause = change["cause"]?["type"]?.stringValue,
            ["PHYSICAL_INTERACTION", "PERIODIC_POLL", "APP_INTERACTION", "RULE_TRIGGER", "VOICE_INTERACTION"]
                .contains(cause)
        else { return "event.payload.change.cause.type must be one of Alexa's causes" }
        guard case .array(let properties)? = change["properties"], !properties.isEmpty else {
            return "event.payload.change.properties must name at least one property"
        }
        for (index, property) in properties.enumerated() {
            let at = "event.payload.change.properties[\(index)]"
            guard property["namespace"]?.stringValue == "Alexa.InventoryLevelSensor",
                property["name"]?.stringValue == "level", property["instance"]?.stringValue?.isEmpty == false
            else { return "\(at) must be Alexa.InventoryLevelSensor's level, with its instance" }
            guard isTime(property["timeOfSample"]?.stringValue) else { return "\(at).timeOfSample must be a UTC time" }
            guard let uncertainty = property["uncertaintyInMilliseconds"]?.numberValue, uncertainty >= 0,
                uncertainty == uncertainty.rounded()
            else { return "\(at).uncertaintyInMilliseconds must be a whole number" }
            if let problem = levelProblem(property["value"], at: "\(at).value") { return problem }
        }
        return nil
    }

    /// An `InventoryLevelSensor` level: Count (whole), Percentage (0-100), Volume or Weight with a unit.
    static func levelProblem(_ level: JSONValue?, at path: String) -> String? {
        guard let level, let type = level["@type"]?.stringValue, let value = level["value"]?.numberValue, value >= 0
        else { return "\(path) must have an @type and a value of at least 0" }
        switch type {
        case "Count":
            return value == value.rounded() && keys(level) == ["@type", "value"] ? nil : "\(path): a Count is whole"
        case "Percentage":
            return value <= 100 && keys(level) == ["@type", "value"] ? nil : "\(path): a Percentage is 0 to 100"
        case "Weight":
            return weightUnits.contains(level["unit"]?.stringValue ?? "") ? nil : "\(path).unit is not a weight unit"
        case "Volume":
            return level["unit"]?.stringValue?.isEmpty == false ? nil : "\(path).unit is required"
        default:
            return "\(path).@type must be Count, Percentage, Volume or Weight"
        }
    }

    static func inventoryConsumed(_ body: JSONValue, token: String) -> String? {
        guard body["header"]?["instance"]?.stringValue?.isEmpty == false else {
            return "InventoryConsumed's header must name the sensor's instance"
        }
        if let problem = endpointProblem(body["endpoint"], token: token) { return problem }
        guard let payload = body["payload"], keys(payload) == ["usage", "timeOfSample"] else {
            return "InventoryConsumed's payload is {usage, timeOfSample}"
        }
        guard isTime(payload["timeOfSample"]?.stringValue) else {
            return "event.payload.timeOfSample must be a UTC time"
        }
        guard let usage = payload["usage"], let value = usage["value"]?.numberValue else {
            return "event.payload.usage must have a value"
        }
        switch usage["@type"]?.stringValue {
        case "Count"?:
            return value >= 1 && value == value.rounded() ? nil : "event.payload.usage: a Count of at least 1"
        case "Weight"?, "Volume"?:
            return value > 0 && usage["unit"] != nil ? nil : "event.payload.usage: a positive amount with its unit"
        default:
            return "event.payload.usage.@type must be Count, Weight or Volume"
        }
    }

    static func discovery(_ body: JSONValue, token: String, add: Bool) -> String? {
        guard let payload = body["payload"], keys(payload) == ["endpoints", "scope"] else {
            return "the discovery event's payload is {endpoints, scope}"
        }
        if let problem = scopeProblem(payload["scope"], token: token, at: "event.payload.scope") { return problem }
        guard case .array(let endpoints)? = payload["endpoints"], !endpoints.isEmpty else {
            return "event.payload.endpoints must list at least one endpoint"
        }
        for (index, endpoint) in endpoints.enumerated() {
            let at = "event.payload.endpoints[\(index)]"
            guard let id = endpoint["endpointId"]?.stringValue, isEndpointId(id) else { return "\(at).endpointId" }
            guard add else {
                if keys(endpoint) != ["endpointId"] { return "\(at): a DeleteReport names endpoints by id only" }
                continue
            }
            for field in ["manufacturerName", "friendlyName", "description"] {
                guard let text = endpoint[field]?.stringValue, (1...128).contains(text.count) else {
                    return "\(at).\(field) must be 1 to 128 characters"
                }
            }
            guard case .array(let categories)? = endpoint["displayCategories"], !categories.isEmpty else {
                return "\(at).displayCategories must not be empty"
            }
            guard case .array(let capabilities)? = endpoint["capabilities"], !capabilities.isEmpty else {
                return "\(at).capabilities must not be empty"
            }
            for (position, capability) in capabilities.enumerated() {
                if let problem = capabilityProblem(capability, at: "\(at).capabilities[\(position)]") { return problem }
            }
        }
        return nil
    }

    static func capabilityProblem(_ capability: JSONValue, at path: String) -> String? {
        guard capability["type"]?.stringValue == "AlexaInterface", capability["version"]?.stringValue == "3",
            let interface = capability["interface"]?.stringValue
        else { return "\(path) must be an AlexaInterface of version \"3\"" }
        switch interface {
        case "Alexa":
            return nil
        case "Alexa.InventoryLevelSensor", "Alexa.InventoryUsageSensor":
            guard capability["instance"]?.stringValue?.isEmpty == false,
                capability["capabilityResources"]?["friendlyNames"] != nil
            else { return "\(path): an inventory sensor needs its instance and friendly names" }
            guard let configuration = capability["configuration"],
                keys(configuration) == ["measurement", "replenishment"],
                configuration["replenishment"]?["@type"]?.stringValue == "DashReplenishmentId",
                configuration["replenishment"]?["value"]?.stringValue?.isEmpty == false,
                configuration["measurement"]?["@type"]?.stringValue != nil
            else { return "\(path).configuration needs a measurement and a Dash Replenishment id" }
            if interface == "Alexa.InventoryUsageSensor", capability["properties"] != nil {
                return "\(path): a usage sensor has no properties"
            }
            return nil
        default:
            return "\(path): \(interface) is not an interface of a supplies skill"
        }
    }
}
