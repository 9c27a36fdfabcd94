#!/usr/bin/env python3
"""Every Alexa message replenish-cloud's suites saw it write, checked against Amazon's schema.

    alexa-schema-check.py SCHEMA_FOLDER MESSAGES_FOLDER

SCHEMA_FOLDER holds Amazon's alexa_smart_home_message_schema.json (JSON Schema draft 4, from
alexa-samples/alexa-smarthome, Amazon Software License: cloud/Tests/AlexaSchema/README.md). Amazon's schema has
no entry for two messages the service sends: Alexa.InventoryUsageSensor's InventoryConsumed and
Alexa.Discovery's DeleteReport, and it refuses an Alexa.InventoryUsageSensor capability in a discovery. Those are checked against the schemas below, written from Amazon's pages
(docs/cloud.md says which). Before the messages, the check shows it can fail: Amazon's schema must refuse a
ChangeReport with a level of an unknown type, a time without its zone and a header field it does not know,
the written schemas must refuse an InventoryConsumed without its usage or instance, and both must refuse a
discovery whose inventory sensors lack their Dash Replenishment id.
Exit 0 only if every message passes and every planted fault is refused.
"""
import copy
import json
import pathlib
import sys

import jsonschema

TIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$"
HEADER = {
    "type": "object",
    "required": ["namespace", "name", "payloadVersion", "messageId"],
    "additionalProperties": False,
    "properties": {
        "namespace": {"type": "string"}, "name": {"type": "string"}, "payloadVersion": {"enum": ["3"]},
        "messageId": {"type": "string", "minLength": 1, "maxLength": 127}, "instance": {"type": "string"},
        "correlationToken": {"type": "string"},
    },
}
SCOPE = {
    "type": "object", "required": ["type", "token"], "additionalProperties": False,
    "properties": {"type": {"enum": ["BearerToken"]}, "token": {"type": "string", "minLength": 1}},
}
# Alexa.InventoryUsageSensor InventoryConsumed (developer.amazon.com/docs/device-apis/alexa-inventoryusagesensor.html).
INVENTORY_CONSUMED = {
    "type": "object", "required": ["event"], "additionalProperties": False,
    "properties": {"event": {
        "type": "object", "required": ["header", "endpoint", "payload"], "additionalProperties": False,
        "properties": {
            "header": dict(HEADER, required=HEADER["required"] + ["instance"], properties=dict(
                HEADER["properties"], namespace={"enum": ["Alexa.InventoryUsageSensor"]},
                name={"enum": ["InventoryConsumed"]})),
            "endpoint": {
                "type": "object", "required": ["scope", "endpointId"], "additionalProperties": False,
                "properties": {"scope": SCOPE, "endpointId": {"type": "string", "pattern": r"^[a-zA-Z0-9_\-=#;:?@&]{1,256}$"}},
            },
            "payload": {
                "type": "object", "required": ["usage", "timeOfSample"], "additionalProperties": False,
                "properties": {
                    "usage": {"oneOf": [
                        {"type": "object", "required": ["@type", "value"], "additionalProperties": False,
                         "properties": {"@type": {"enum": ["Count"]}, "value": {"type": "integer", "minimum": 1}}},
                        {"type": "object", "required": ["@type", "value", "unit"], "additionalProperties": False,
                         "properties": {"@type": {"enum": ["Weight", "Volume"]}, "value": {"type": "number", "minimum": 0},
                                        "unit": {"type": "string"}}},
                    ]},
                    "timeOfSample": {"type": "string", "pattern": TIME},
                },
            },
        },
    }},
}
# Alexa.Discovery DeleteReport (developer.amazon.com/docs/device-apis/alexa-discovery.html#deletereport-event).
DELETE_REPORT = {
    "type": "object", "required": ["event"], "additionalProperties": False,
    "properties": {"event": {
        "type": "object", "required": ["header", "payload"], "additionalProperties": False,
        "properties": {
            "header": dict(HEADER, properties=dict(
                HEADER["properties"], namespace={"enum": ["Alexa.Discovery"]}, name={"enum": ["DeleteReport"]})),
            "payload": {
                "type": "object", "required": ["endpoints", "scope"], "additionalProperties": False,
                "properties": {
                    "endpoints": {"type": "array", "minItems": 1, "items": {
                        "type": "object", "required": ["endpointId"], "additionalProperties": False,
                        "properties": {"endpointId": {"type": "string", "minLength": 1}}}},
                    "scope": SCOPE,
                },
            },
        },
    }},
}
# An Alexa.InventoryUsageSensor capability in a discovery (developer.amazon.com/docs/device-apis/alexa-inventoryusagesensor.html):
# Amazon's schema has no entry for the interface and refuses it, so discovery messages are checked with their
# usage sensors taken out, and each usage sensor against this.
USAGE_CAPABILITY = {
    "type": "object", "additionalProperties": False,
    "required": ["type", "interface", "version", "instance", "capabilityResources", "configuration"],
    "properties": {
        "type": {"enum": ["AlexaInterface"]}, "interface": {"enum": ["Alexa.InventoryUsageSensor"]},
        "version": {"enum": ["3"]}, "instance": {"type": "string", "minLength": 1},
        "capabilityResources": {"type": "object", "required": ["friendlyNames"], "properties": {"friendlyNames": {
            "type": "array", "minItems": 1, "items": {"type": "object", "required": ["@type", "value"]}}}},
        "configuration": {
            "type": "object", "required": ["measurement", "replenishment"], "additionalProperties": False,
            "properties": {
                "measurement": {"oneOf": [
                    {"type": "object", "required": ["@type"], "additionalProperties": False,
                     "properties": {"@type": {"enum": ["Count"]}}},
                    {"type": "object", "required": ["@type", "unit"], "additionalProperties": False,
                     "properties": {"@type": {"enum": ["Weight", "Volume"]}, "unit": {"type": "string"}}},
                ]},
                "replenishment": {
                    "type": "object", "required": ["@type", "value"], "additionalProperties": False,
                    "properties": {"@type": {"enum": ["DashReplenishmentId"]}, "value": {"type": "string", "minLength": 1}},
                },
            },
        },
    },
}
WRITTEN = {("Alexa.InventoryUsageSensor", "InventoryConsumed"): INVENTORY_CONSUMED,
           ("Alexa.Discovery", "DeleteReport"): DELETE_REPORT}


def validator_for(message, amazon):
    header = message.get("event", {}).get("header", {})
    key = (header.get("namespace"), header.get("name"))
    schema = WRITTEN.get(key)
    return (jsonschema.Draft4Validator(schema), "written from Amazon's pages") if schema else (amazon, "Amazon's schema")


def errors(validator, message):
    """The validator's errors, and for a discovery message its usage sensors' against USAGE_CAPABILITY."""
    header = message.get("event", {}).get("header", {})
    if header.get("namespace") == "Alexa.Discovery" and header.get("name") in ("Discover.Response", "AddOrUpdateReport"):
        message = copy.deepcopy(message)
        usage_validator = jsonschema.Draft4Validator(USAGE_CAPABILITY)
        found = []
        for endpoint in message["event"].get("payload", {}).get("endpoints", []):
            capabilities = endpoint.get("capabilities", [])
            usage = [c for c in capabilities if c.get("interface") == "Alexa.InventoryUsageSensor"]
            endpoint["capabilities"] = [c for c in capabilities if c not in usage]
            found += [f"usage sensor: {error.message[:200]}" for c in usage for error in usage_validator.iter_errors(c)]
        return sorted(found + [deepest(error) for error in validator.iter_errors(message)])
    return sorted(deepest(error) for error in validator.iter_errors(message))


def deepest(error):
    """The most specific reason under a oneOf/anyOf, with its path."""
    while error.context:
        error = max(error.context, key=lambda e: len(list(e.absolute_path)))
    return f"{'/'.join(map(str, error.absolute_path))}: {error.message[:200]}"


def planted(amazon, messages):
    """The faults each check must refuse, planted in a copy of a message that passes."""
    faults = []
    change = next((m for m in messages if m["event"]["header"]["name"] == "ChangeReport"), None)
    consumed = next((m for m in messages if m["event"]["header"]["name"] == "InventoryConsumed"), None)
    if change is None or consumed is None:
        return ["the suites wrote no ChangeReport or no InventoryConsumed: nothing to plant faults in"]
    for label, plant in [
        ("a level of an unknown @type", lambda m: m["event"]["payload"]["change"]["properties"][0]["value"].update({"@type": "Liters"})),
        ("a timeOfSample without its zone", lambda m: m["event"]["payload"]["change"]["properties"][0].update({"timeOfSample": "2026-11-29T10:00:00"})),
        ("a header field Alexa does not know", lambda m: m["event"]["header"].update({"sequence": 1})),
    ]:
        wrong = copy.deepcopy(change)
        plant(wrong)
        if not errors(amazon, wrong):
            faults.append(f"Amazon's schema took a ChangeReport with {label}")
    for label, plant in [
        ("no usage", lambda m: m["event"]["payload"].pop("usage")),
        ("no instance", lambda m: m["event"]["header"].pop("instance")),
        ("a usage of 0", lambda m: m["event"]["payload"]["usage"].update({"value": 0})),
    ]:
        wrong = copy.deepcopy(consumed)
        plant(wrong)
        if not errors(jsonschema.Draft4Validator(INVENTORY_CONSUMED), wrong):
            faults.append(f"the written schema took an InventoryConsumed with {label}")
    discovery = next((m for m in messages if m["event"]["header"]["name"] == "AddOrUpdateReport"), None)
    if discovery is None:
        return faults + ["the suites wrote no AddOrUpdateReport: nothing to plant faults in"]
    wrong = copy.deepcopy(discovery)
    for capability in wrong["event"]["payload"]["endpoints"][0]["capabilities"]:
        capability.get("configuration", {}).pop("replenishment", None)
    if not any(e.startswith("usage sensor") for e in errors(amazon, wrong)) or len(errors(amazon, wrong)) < 2:
        faults.append("a discovery whose inventory sensors lack their Dash Replenishment id was taken")
    return faults


def main():
    schema_folder, messages_folder = map(pathlib.Path, sys.argv[1:3])
    amazon = jsonschema.Draft4Validator(json.loads((schema_folder / "alexa_smart_home_message_schema.json").read_text()))
    paths = sorted(messages_folder.glob("*.json"))
    messages = [json.loads(path.read_text()) for path in paths]
    failed = 0
    by_kind = {}
    for path, message in zip(paths, messages):
        validator, source = validator_for(message, amazon)
        header = message.get("event", {}).get("header", {})
        kind = f'{header.get("namespace")}.{header.get("name")}'
        by_kind.setdefault((kind, source), 0)
        by_kind[(kind, source)] += 1
        found = errors(validator, message)
        if found:
            failed += 1
            print(f"alexa-schema-check: {path.name} ({kind}) refused by {source}: {'; '.join(found[:3])}")
    faults = planted(amazon, messages)
    for fault in faults:
        print(f"alexa-schema-check: {fault}")
    for (kind, source), count in sorted(by_kind.items()):
        print(f"alexa-schema-check: {count:3d} {kind} ({source})")
    print(f"alexa-schema-check: {len(messages)} messages, {failed} refused; {7 - len(faults)} of 7 planted faults refused")
    return 1 if failed or faults or not messages else 0


if __name__ == "__main__":
    sys.exit(main())
