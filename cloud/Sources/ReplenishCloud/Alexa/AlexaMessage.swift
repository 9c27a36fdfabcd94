import Foundation

/// The Alexa smart home messages the service writes (payload version 3): directive answers and the events it
/// sends to the gateway. Each is checked by `scripts/alexa-schema-check.py` against Amazon's published schema, or
/// against the checks written from Amazon's pages where the schema has no entry (`docs/cloud.md`).
public enum AlexaMessage {
    static func header(
        _ namespace: String, _ name: String, messageId: String = UUID().uuidString.lowercased(),
        correlationToken: String? = nil, instance: String? = nil
    ) -> JSON {
        var members: [String: JSON] = [
            "namespace": .string(namespace), "name": .string(name), "payloadVersion": "3",
            "messageId": .string(messageId),
        ]
        if let correlationToken { members["correlationToken"] = .string(correlationToken) }
        if let instance { members["instance"] = .string(instance) }
        return .object(members)
    }

    /// A unit as an Alexa endpoint, with one inventory sensor per supply of its model.
    public static func endpoint(unit: String, model: Catalogue.Model, manufacturer: String) -> JSON {
        var capabilities: [JSON] = [["type": "AlexaInterface", "interface": "Alexa", "version": "3"]]
        for slot in model.slots {
            var capability: [String: JSON] = [
                "type": "AlexaInterface", "version": "3", "instance": .string(slot.instance),
                "interface": slot.sensor == .usage ? "Alexa.InventoryUsageSensor" : "Alexa.InventoryLevelSensor",
                "capabilityResources": [
                    "friendlyNames": [["@type": "text", "value": ["text": .string(slot.name), "locale": "en-US"]]]
                ],
                "configuration": [
                    "measurement": slot.measurement,
                    "replenishment": ["@type": "DashReplenishmentId", "value": .string(slot.dashReplenishmentId)],
                ],
            ]
            if slot.sensor == .level {
                capability["properties"] = [
                    "supported": [["name": "level"]], "proactivelyReported": true, "retrievable": true,
                ]
            }
            capabilities.append(.object(capability))
        }
        return [
            "endpointId": .string(unit), "manufacturerName": .string(manufacturer),
            "friendlyName": .string(model.friendlyName), "description": .string(model.description),
            "displayCategories": ["OTHER"], "capabilities": .array(capabilities),
        ]
    }

    public static func discoverResponse(endpoints: [JSON]) -> JSON {
        [
            "event": [
                "header": header("Alexa.Discovery", "Discover.Response"), "payload": ["endpoints": .array(endpoints)],
            ]
        ]
    }

    /// A level as a context or change property.
    public static func levelProperty(slot: Catalogue.Slot, level: JSON, sampledAt: String) -> JSON {
        [
            "namespace": "Alexa.InventoryLevelSensor", "instance": .string(slot.instance), "name": "level",
            "value": level, "timeOfSample": .string(sampledAt), "uncertaintyInMilliseconds": 0,
        ]
    }

    public static func stateReport(endpoint: JSON, correlationToken: String?, properties: [JSON]) -> JSON {
        [
            "event": [
                "header": header("Alexa", "StateReport", correlationToken: correlationToken),
                "endpoint": endpoint, "payload": [:],
            ],
            "context": ["properties": .array(properties)],
        ]
    }

    // The events below are stored without the customer's token: `EventSender` puts the scope in at sending,
    // with the grant's token of that moment.

    /// A level changed (`cause` PHYSICAL_INTERACTION), or the daily update of every level (PERIODIC_POLL).
    /// `context`: the endpoint's other properties, unchanged, as Alexa asks a ChangeReport to carry them.
    public static func changeReport(unit: String, properties: [JSON], periodic: Bool, context: [JSON] = []) -> JSON {
        [
            "event": [
                "header": header("Alexa", "ChangeReport"), "endpoint": ["endpointId": .string(unit)],
                "payload": [
                    "change": [
                        "cause": ["type": periodic ? "PERIODIC_POLL" : "PHYSICAL_INTERACTION"],
                        "properties": .array(properties),
                    ]
                ],
            ],
            "context": ["properties": .array(context)],
        ]
    }

    /// Units of a supply used (`Alexa.InventoryUsageSensor`).
    public static func inventoryConsumed(unit: String, slot: Catalogue.Slot, count: Int, sampledAt: String) -> JSON {
        var usage: [String: JSON] = ["@type": slot.measurement["@type"] ?? "Count", "value": .number(Double(count))]
        if let unit = slot.measurement["unit"] { usage["unit"] = unit }
        return [
            "event": [
                "header": header("Alexa.InventoryUsageSensor", "InventoryConsumed", instance: slot.instance),
                "endpoint": ["endpointId": .string(unit)],
                "payload": ["usage": .object(usage), "timeOfSample": .string(sampledAt)],
            ]
        ]
    }

    /// A unit the customer claimed, told to Alexa without waiting for a discovery.
    public static func addOrUpdateReport(endpoint: JSON) -> JSON {
        ["event": ["header": header("Alexa.Discovery", "AddOrUpdateReport"), "payload": ["endpoints": [endpoint]]]]
    }

    /// A unit the customer released.
    public static func deleteReport(unit: String) -> JSON {
        [
            "event": [
                "header": header("Alexa.Discovery", "DeleteReport"),
                "payload": ["endpoints": [["endpointId": .string(unit)]]],
            ]
        ]
    }

    /// The event with the customer's token as its scope: in the endpoint, or the payload of a discovery event.
    public static func withScope(_ event: JSON, token: String) -> JSON {
        guard case .object(var root) = event, case .object(var body)? = root["event"] else { return event }
        let scope: JSON = ["type": "BearerToken", "token": .string(token)]
        if case .object(var endpoint)? = body["endpoint"] {
            endpoint["scope"] = scope
            body["endpoint"] = .object(endpoint)
        } else if case .object(var payload)? = body["payload"] {
            payload["scope"] = scope
            body["payload"] = .object(payload)
        }
        root["event"] = .object(body)
        return .object(root)
    }

    public static func acceptGrantResponse() -> JSON {
        ["event": ["header": header("Alexa.Authorization", "AcceptGrant.Response"), "payload": [:]]]
    }

    public static func acceptGrantFailed(_ message: String) -> JSON {
        [
            "event": [
                "header": header("Alexa.Authorization", "ErrorResponse"),
                "payload": ["type": "ACCEPT_GRANT_FAILED", "message": .string(message)],
            ]
        ]
    }

    /// An `Alexa.ErrorResponse` (`type`: INVALID_DIRECTIVE, NO_SUCH_ENDPOINT, INVALID_AUTHORIZATION_CREDENTIAL,
    /// EXPIRED_AUTHORIZATION_CREDENTIAL, INTERNAL_ERROR, …).
    public static func errorResponse(type: String, message: String, correlationToken: String?, endpoint: JSON?) -> JSON
    {
        var event: [String: JSON] = [
            "header": header("Alexa", "ErrorResponse", correlationToken: correlationToken),
            "payload": ["type": .string(type), "message": .string(message)],
        ]
        if let endpoint { event["endpoint"] = endpoint }
        return ["event": .object(event)]
    }
}
