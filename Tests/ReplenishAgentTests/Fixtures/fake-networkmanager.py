#!/usr/bin/python3
"""A fake NetworkManager on a private bus, for DBusNetworkManagerTests: the objects, properties, methods and signals
of NetworkManager's D-Bus API that the agent's setup mode uses (docs/wifi-setup.md), with a home network whose
passphrase is "correct horse".

    fake-networkmanager.py BUS_ADDRESS LOG_FILE

Each call is a JSON line in LOG_FILE (the settings of an activation included, so the test sees what the agent
asked for); "ready" goes to stdout once the name is owned. Test-only methods on /org/replenish/Test:
SetOnline(b) and Quit(). Like NetworkManager with its autoconnect blocked, it never joins a saved network again on
its own: only ActivateConnection does.
"""
import json
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

NM = "org.freedesktop.NetworkManager"
PROPS = "org.freedesktop.DBus.Properties"
ROOT = "/org/freedesktop/NetworkManager"
HOME, HOME_PASSPHRASE = "Home Net", "correct horse"

address, log_path = sys.argv[1], sys.argv[2]
DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(address)
bus.set_exit_on_disconnect(True)  # never outlives the test's bus
name = dbus.service.BusName(NM, bus)
log_file = open(log_path, "a", buffering=1)


def log(**entry):
    log_file.write(json.dumps(entry) + "\n")


def plain(value):
    """D-Bus values as JSON (byte arrays as text)."""
    if isinstance(value, dbus.Array) and value.signature == "y":
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, (dbus.Dictionary, dict)):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (dbus.Array, list)):
        return [plain(v) for v in value]
    if isinstance(value, dbus.Boolean):
        return bool(value)
    if isinstance(value, (dbus.String, dbus.ObjectPath)):
        return str(value)
    if isinstance(value, (dbus.UInt32, dbus.Byte, dbus.Int32)):
        return int(value)
    return value


class Object(dbus.service.Object):
    """An object with properties per interface, answering Get and GetAll and signalling changes."""

    def __init__(self, path, properties):
        super().__init__(bus, path)
        self.path = path
        self.properties = properties

    @dbus.service.method(PROPS, in_signature="ss", out_signature="v")
    def Get(self, interface, prop):
        return self.properties[interface][prop]

    @dbus.service.method(PROPS, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        return self.properties.get(interface, {})

    @dbus.service.signal(PROPS, signature="sa{sv}as")
    def PropertiesChanged(self, interface, changed, invalidated):
        pass

    def set(self, interface, prop, value):
        self.properties[interface][prop] = value
        self.PropertiesChanged(interface, {prop: value}, [])


def ap_flags(security):
    if security == "wpa":
        return dbus.UInt32(0x1), dbus.UInt32(0), dbus.UInt32(0x188)  # privacy; RSN PSK, CCMP
    if security == "enterprise":
        return dbus.UInt32(0x1), dbus.UInt32(0), dbus.UInt32(0x288)  # RSN 802.1X
    return dbus.UInt32(0), dbus.UInt32(0), dbus.UInt32(0)


access_points = []
for index, (ssid, strength, security, frequency) in enumerate(
    [(HOME, 80, "wpa", 2437), ("Cafe", 30, "open", 2462), ("Corp", 50, "enterprise", 5180), (HOME, 40, "wpa", 2412)]
):
    flags, wpa, rsn = ap_flags(security)
    access_points.append(
        Object(
            f"{ROOT}/AccessPoint/{index}",
            {
                f"{NM}.AccessPoint": {
                    "Ssid": dbus.Array(ssid.encode(), signature="y"),
                    "Strength": dbus.Byte(strength),
                    "Flags": flags,
                    "WpaFlags": wpa,
                    "RsnFlags": rsn,
                    "Frequency": dbus.UInt32(frequency),
                }
            },
        )
    )


class Device(Object):
    def __init__(self):
        super().__init__(
            f"{ROOT}/Devices/1",
            {
                f"{NM}.Device": {
                    "DeviceType": dbus.UInt32(2),
                    "Interface": "wlan0",
                    "State": dbus.UInt32(30),
                    "AvailableConnections": dbus.Array([], signature="o"),
                    "StateReason": dbus.Struct((dbus.UInt32(30), dbus.UInt32(0)), signature="uu"),
                },
                f"{NM}.Device.Wireless": {},
            },
        )

    def Get(self, interface, prop):
        if prop == "AvailableConnections":  # every saved connection: each network of the fake is in range
            return dbus.Array([c.path for c in self.settings.connections], signature="o")
        return super().Get(interface, prop)

    @dbus.service.signal(f"{NM}.Device", signature="uuu")
    def StateChanged(self, new, old, reason):
        pass

    @dbus.service.method(f"{NM}.Device.Wireless", in_signature="a{sv}")
    def RequestScan(self, options):
        log(call="RequestScan")

    @dbus.service.method(f"{NM}.Device.Wireless", out_signature="ao")
    def GetAllAccessPoints(self):
        return dbus.Array([ap.path for ap in access_points], signature="o")


class Connection(Object):
    def __init__(self, index, settings):
        super().__init__(f"{ROOT}/Settings/{index}", {})
        self.settings = settings

    @dbus.service.method(f"{NM}.Settings.Connection", out_signature="a{sa{sv}}")
    def GetSettings(self):
        return self.settings

    @dbus.service.method(f"{NM}.Settings.Connection")
    def Delete(self):
        log(call="Delete", path=self.path)
        self.remove_from_connection()


class Settings(Object):
    def __init__(self):
        super().__init__(f"{ROOT}/Settings", {})
        self.connections = []

    @dbus.service.method(f"{NM}.Settings", out_signature="ao")
    def ListConnections(self):
        return dbus.Array([c.path for c in self.connections], signature="o")


class Manager(Object):
    def __init__(self):
        super().__init__(ROOT, {NM: {"State": dbus.UInt32(20), "Connectivity": dbus.UInt32(1)}})
        self.device = Device()
        self.settings = Settings()
        self.device.settings = self.settings
        self.active = {}
        self.count = 0

    @dbus.service.signal(NM, signature="u")
    def StateChanged(self, state):
        pass

    def online(self, up):
        self.set(NM, "State", dbus.UInt32(70 if up else 20))
        self.set(NM, "Connectivity", dbus.UInt32(4 if up else 1))
        self.device.set(f"{NM}.Device", "State", dbus.UInt32(100 if up else 30))
        self.StateChanged(dbus.UInt32(70 if up else 20))

    @dbus.service.method(NM, out_signature="ao")
    def GetDevices(self):
        return dbus.Array([self.device.path], signature="o")

    @dbus.service.method(NM, in_signature="a{sa{sv}}ooa{sv}", out_signature="ooa{sv}")
    def AddAndActivateConnection2(self, settings, device, specific, options):
        settings_plain, options_plain = plain(settings), plain(options)
        log(call="AddAndActivateConnection2", settings=settings_plain, device=str(device), options=options_plain)
        self.count += 1
        path = f"{ROOT}/ActiveConnection/{self.count}"
        active = Object(path, {f"{NM}.Connection.Active": {"State": dbus.UInt32(1)}})
        self.active[path] = active
        wireless = settings_plain.get("802-11-wireless", {})
        psk = settings_plain.get("802-11-wireless-security", {}).get("psk")
        if wireless.get("mode") == "ap":
            # Listed among the connections while it is up, as NetworkManager lists a volatile one: first, so that
            # the agent's reconnect must pass it over.
            active.profile = Connection(100 + self.count, settings)
            self.settings.connections.insert(0, active.profile)
            active.set(f"{NM}.Connection.Active", "State", dbus.UInt32(2))
            return active.profile.path, path, dbus.Dictionary({}, signature="sv")
        # The station's profile, saved at once (persist "disk"), listed once the join succeeded.
        connection = Connection(100 + self.count, settings)
        GLib.timeout_add(200, self.finish_join, active, wireless.get("ssid"), psk, connection)
        return connection.path, path, dbus.Dictionary({}, signature="sv")

    def finish_join(self, active, ssid, psk, connection):
        if ssid != HOME:
            self.fail(active, 53)
        elif psk != HOME_PASSPHRASE:
            self.fail(active, 7)
        else:
            self.settings.connections.append(connection)
            active.set(f"{NM}.Connection.Active", "State", dbus.UInt32(2))
            self.online(True)
        return False

    def fail(self, active, reason):
        # As NetworkManager does: the device fails with the reason (StateChanged 120), then moves on to
        # "disconnected" with no reason, before the active connection is read as deactivated.
        self.device.StateChanged(dbus.UInt32(120), dbus.UInt32(50), dbus.UInt32(reason))
        self.device.set(f"{NM}.Device", "StateReason", dbus.Struct((dbus.UInt32(30), dbus.UInt32(0)), signature="uu"))
        active.set(f"{NM}.Connection.Active", "State", dbus.UInt32(4))

    @dbus.service.method(NM, in_signature="o")
    def DeactivateConnection(self, path):
        log(call="DeactivateConnection", path=str(path))
        active = self.active.pop(str(path), None)
        if active is None:
            raise dbus.exceptions.DBusException("not active", name=f"{NM}.ConnectionNotActive")
        active.set(f"{NM}.Connection.Active", "State", dbus.UInt32(4))
        active.remove_from_connection()
        if getattr(active, "profile", None) in self.settings.connections:
            self.settings.connections.remove(active.profile)

    @dbus.service.method(NM, in_signature="ooo", out_signature="o")
    def ActivateConnection(self, connection, device, specific):
        log(call="ActivateConnection", connection=str(connection), device=str(device), specific=str(specific))
        if str(connection) not in [c.path for c in self.settings.connections]:
            raise dbus.exceptions.DBusException("no such connection", name=f"{NM}.UnknownConnection")
        self.count += 1
        path = f"{ROOT}/ActiveConnection/{self.count}"
        active = Object(path, {f"{NM}.Connection.Active": {"State": dbus.UInt32(1)}})
        self.active[path] = active
        self.device.set(f"{NM}.Device", "State", dbus.UInt32(50))

        def activated():
            active.set(f"{NM}.Connection.Active", "State", dbus.UInt32(2))
            self.online(True)
            return False

        GLib.timeout_add(200, activated)
        return path


class Test(dbus.service.Object):
    def __init__(self, manager, loop):
        super().__init__(bus, "/org/replenish/Test")
        self.manager, self.loop = manager, loop

    @dbus.service.method("org.replenish.Test", in_signature="b")
    def SetOnline(self, up):
        self.manager.online(bool(up))

    @dbus.service.method("org.replenish.Test")
    def Quit(self):
        GLib.idle_add(self.loop.quit)


loop = GLib.MainLoop()
Test(Manager(), loop)
print("ready", flush=True)
loop.run()
