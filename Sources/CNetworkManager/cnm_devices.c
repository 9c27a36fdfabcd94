// What NetworkManager knows that the setup mode asks: the Wi-Fi device, the saved Wi-Fi connections, and the
// networks in range (a scan); and the reading of an `a{sv}` dictionary, which their answers are.
#include "cnm_internal.h"

#include <stdio.h>
#include <string.h>

struct device_search {
    const char *interface;
    char *path;
    size_t path_size;
    int found;
};

static int match_device(cnm *m, const char *object, void *context) {
    struct device_search *search = context;
    uint32_t type = 0;
    char ignored[256];
    if (cnm_get_u32(m, object, "org.freedesktop.NetworkManager.Device", "DeviceType", &type, ignored,
                    sizeof ignored) != 0 ||
        type != 2)
        return 0;
    if (search->interface[0]) {
        DBusMessageIter value;
        DBusMessage *reply = cnm_get_property(m, object, "org.freedesktop.NetworkManager.Device", "Interface", &value,
                                              ignored, sizeof ignored);
        if (!reply) return 0;
        const char *name = "";
        if (cnm_d.dbus_message_iter_get_arg_type(&value) == T_STRING) cnm_d.dbus_message_iter_get_basic(&value, &name);
        int same = strcmp(name, search->interface) == 0;
        cnm_d.dbus_message_unref(reply);
        if (!same) return 0;
    }
    snprintf(search->path, search->path_size, "%s", object);
    search->found = 1;
    return 1;
}

int cnm_wifi_device(cnm *m, const char *interface, char *path, size_t path_size, char *error, size_t size) {
    struct device_search search = {interface ? interface : "", path, path_size, 0};
    if (cnm_each_path(m, NM_PATH, NM, "GetDevices", match_device, &search, error, size) != 0) return CNM_FAILED;
    if (!search.found) {
        if (search.interface[0])
            snprintf(error, size, "NetworkManager has no Wi-Fi device %s", search.interface);
        else
            snprintf(error, size, "NetworkManager has no Wi-Fi device");
        return CNM_FAILED;
    }
    return 0;
}

/// In an `a{sv}` dictionary, moves `value` to the variant's content of `key`; 0 when it is not there.
static int find_key(DBusMessageIter *dict, const char *key, DBusMessageIter *value) {
    DBusMessageIter entries = *dict;
    while (cnm_d.dbus_message_iter_get_arg_type(&entries) == T_DICT_ENTRY) {
        DBusMessageIter entry, variant;
        cnm_d.dbus_message_iter_recurse(&entries, &entry);
        const char *name = NULL;
        if (cnm_d.dbus_message_iter_get_arg_type(&entry) == T_STRING) {
            cnm_d.dbus_message_iter_get_basic(&entry, &name);
            cnm_d.dbus_message_iter_next(&entry);
            if (name && strcmp(name, key) == 0) {
                if (cnm_d.dbus_message_iter_get_arg_type(&entry) == T_VARIANT) {
                    cnm_d.dbus_message_iter_recurse(&entry, &variant);
                    *value = variant;
                } else {
                    *value = entry;
                }
                return 1;
            }
        }
        cnm_d.dbus_message_iter_next(&entries);
    }
    return 0;
}

static const char *string_in(DBusMessageIter *dict, const char *key) {
    DBusMessageIter value;
    const char *text = NULL;
    if (find_key(dict, key, &value) && cnm_d.dbus_message_iter_get_arg_type(&value) == T_STRING)
        cnm_d.dbus_message_iter_get_basic(&value, &text);
    return text;
}

/// 1 when the saved connection at `object` is a Wi-Fi station's (not an access point's, mode `ap`).
int cnm_is_station_wifi(cnm *m, const char *object) {
    char ignored[256];
    DBusMessage *reply =
        cnm_call(m,
                 cnm_d.dbus_message_new_method_call(NM, object, "org.freedesktop.NetworkManager.Settings.Connection",
                                                    "GetSettings"),
                 "GetSettings", ignored, sizeof ignored);
    if (!reply) return 0;
    int station = 0;
    DBusMessageIter answer, sections, section, wireless;
    if (cnm_d.dbus_message_iter_init(reply, &answer) && cnm_d.dbus_message_iter_get_arg_type(&answer) == T_ARRAY) {
        cnm_d.dbus_message_iter_recurse(&answer, &sections);
        const char *type = NULL, *mode = NULL;
        if (find_key(&sections, "connection", &section) && cnm_d.dbus_message_iter_get_arg_type(&section) == T_ARRAY) {
            DBusMessageIter fields;
            cnm_d.dbus_message_iter_recurse(&section, &fields);
            type = string_in(&fields, "type");
        }
        if (find_key(&sections, "802-11-wireless", &wireless) &&
            cnm_d.dbus_message_iter_get_arg_type(&wireless) == T_ARRAY) {
            DBusMessageIter fields;
            cnm_d.dbus_message_iter_recurse(&wireless, &fields);
            mode = string_in(&fields, "mode");
        }
        station = type && strcmp(type, "802-11-wireless") == 0 && !(mode && strcmp(mode, "ap") == 0);
    }
    cnm_d.dbus_message_unref(reply);
    return station;
}

static int count_saved(cnm *m, const char *object, void *context) {
    if (cnm_is_station_wifi(m, object)) (*(int *)context)++;
    return 0;
}

int cnm_saved_wifi(cnm *m, int *count, char *error, size_t size) {
    *count = 0;
    return cnm_each_path(m, "/org/freedesktop/NetworkManager/Settings", "org.freedesktop.NetworkManager.Settings",
                         "ListConnections", count_saved, count, error, size);
}

struct network_list {
    cnm_network_callback callback;
    void *userdata;
};

static int report_network(cnm *m, const char *object, void *context) {
    struct network_list *list = context;
    char ignored[256];
    DBusMessage *message = cnm_d.dbus_message_new_method_call(NM, object, PROPERTIES, "GetAll");
    if (message) {
        const char *interface = "org.freedesktop.NetworkManager.AccessPoint";
        DBusMessageIter arguments;
        cnm_d.dbus_message_iter_init_append(message, &arguments);
        cnm_d.dbus_message_iter_append_basic(&arguments, T_STRING, &interface);
    }
    DBusMessage *reply = cnm_call(m, message, "GetAll", ignored, sizeof ignored);
    if (!reply) return 0;
    DBusMessageIter answer, properties, value;
    if (cnm_d.dbus_message_iter_init(reply, &answer) && cnm_d.dbus_message_iter_get_arg_type(&answer) == T_ARRAY) {
        cnm_d.dbus_message_iter_recurse(&answer, &properties);
        const uint8_t *ssid = NULL;
        int ssid_length = 0;
        uint8_t strength = 0;
        uint32_t flags = 0, wpa = 0, rsn = 0, frequency = 0;
        if (find_key(&properties, "Ssid", &value) && cnm_d.dbus_message_iter_get_arg_type(&value) == T_ARRAY) {
            DBusMessageIter bytes;
            cnm_d.dbus_message_iter_recurse(&value, &bytes);
            if (cnm_d.dbus_message_iter_get_arg_type(&bytes) == T_BYTE)
                cnm_d.dbus_message_iter_get_fixed_array(&bytes, &ssid, &ssid_length);
        }
        if (find_key(&properties, "Strength", &value) && cnm_d.dbus_message_iter_get_arg_type(&value) == T_BYTE)
            cnm_d.dbus_message_iter_get_basic(&value, &strength);
        if (find_key(&properties, "Flags", &value) && cnm_d.dbus_message_iter_get_arg_type(&value) == T_UINT32)
            cnm_d.dbus_message_iter_get_basic(&value, &flags);
        if (find_key(&properties, "WpaFlags", &value) && cnm_d.dbus_message_iter_get_arg_type(&value) == T_UINT32)
            cnm_d.dbus_message_iter_get_basic(&value, &wpa);
        if (find_key(&properties, "RsnFlags", &value) && cnm_d.dbus_message_iter_get_arg_type(&value) == T_UINT32)
            cnm_d.dbus_message_iter_get_basic(&value, &rsn);
        if (find_key(&properties, "Frequency", &value) && cnm_d.dbus_message_iter_get_arg_type(&value) == T_UINT32)
            cnm_d.dbus_message_iter_get_basic(&value, &frequency);
        // NM_802_11_AP_SEC_KEY_MGMT_802_1X (0x200): enterprise; privacy without WPA or RSN: WEP. Neither is offered.
        int secured = (wpa | rsn) != 0;
        int unsupported = ((wpa | rsn) & 0x200) != 0 || (!secured && (flags & 0x1));
        if (ssid && ssid_length > 0)
            list->callback(ssid, (size_t)ssid_length, strength, frequency, secured, unsupported, list->userdata);
    }
    cnm_d.dbus_message_unref(reply);
    return 0;
}

int cnm_networks(cnm *m, const char *device, cnm_network_callback callback, void *userdata, char *error,
                 size_t size) {
    const char *wireless = "org.freedesktop.NetworkManager.Device.Wireless";
    DBusMessage *scan = cnm_d.dbus_message_new_method_call(NM, device, wireless, "RequestScan");
    if (scan) {
        DBusMessageIter arguments, options;
        cnm_d.dbus_message_iter_init_append(scan, &arguments);
        cnm_d.dbus_message_iter_open_container(&arguments, T_ARRAY, "{sv}", &options);
        cnm_d.dbus_message_iter_close_container(&arguments, &options);
    }
    char ignored[256];
    DBusMessage *scanned = cnm_call(m, scan, "RequestScan", ignored, sizeof ignored);
    if (scanned) cnm_d.dbus_message_unref(scanned);
    struct network_list list = {callback, userdata};
    return cnm_each_path(m, device, wireless, "GetAllAccessPoints", report_network, &list, error, size);
}
