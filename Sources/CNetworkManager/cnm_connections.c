// The connections the setup mode makes and ends: an access point's or a station's activated (and the
// `a{sa{sv}}` settings built for it), an active one deactivated, a saved one deleted, a saved one activated again.
#include "cnm_internal.h"

#include <stdio.h>
#include <string.h>

// Building `a{sa{sv}}`: a section (`s` and its `a{sv}`), and a field of it.
static void open_section(DBusMessageIter *settings, const char *name, DBusMessageIter *entry, DBusMessageIter *fields) {
    cnm_d.dbus_message_iter_open_container(settings, T_DICT_ENTRY, NULL, entry);
    cnm_d.dbus_message_iter_append_basic(entry, T_STRING, &name);
    cnm_d.dbus_message_iter_open_container(entry, T_ARRAY, "{sv}", fields);
}

static void close_section(DBusMessageIter *settings, DBusMessageIter *entry, DBusMessageIter *fields) {
    cnm_d.dbus_message_iter_close_container(entry, fields);
    cnm_d.dbus_message_iter_close_container(settings, entry);
}

static void add_field(DBusMessageIter *fields, const char *key, int type, const void *value) {
    DBusMessageIter entry, variant;
    char signature[2] = {(char)type, 0};
    cnm_d.dbus_message_iter_open_container(fields, T_DICT_ENTRY, NULL, &entry);
    cnm_d.dbus_message_iter_append_basic(&entry, T_STRING, &key);
    cnm_d.dbus_message_iter_open_container(&entry, T_VARIANT, signature, &variant);
    cnm_d.dbus_message_iter_append_basic(&variant, type, value);
    cnm_d.dbus_message_iter_close_container(&entry, &variant);
    cnm_d.dbus_message_iter_close_container(fields, &entry);
}

static void add_string(DBusMessageIter *fields, const char *key, const char *value) {
    add_field(fields, key, T_STRING, &value);
}

static void add_bool(DBusMessageIter *fields, const char *key, int value) {
    dbus_bool_t flag = value ? 1 : 0;
    add_field(fields, key, T_BOOLEAN, &flag);
}

static void add_bytes(DBusMessageIter *fields, const char *key, const uint8_t *bytes, size_t length) {
    DBusMessageIter entry, variant, array;
    cnm_d.dbus_message_iter_open_container(fields, T_DICT_ENTRY, NULL, &entry);
    cnm_d.dbus_message_iter_append_basic(&entry, T_STRING, &key);
    cnm_d.dbus_message_iter_open_container(&entry, T_VARIANT, "ay", &variant);
    cnm_d.dbus_message_iter_open_container(&variant, T_ARRAY, "y", &array);
    cnm_d.dbus_message_iter_append_fixed_array(&array, T_BYTE, &bytes, (int)length);
    cnm_d.dbus_message_iter_close_container(&variant, &array);
    cnm_d.dbus_message_iter_close_container(&entry, &variant);
    cnm_d.dbus_message_iter_close_container(fields, &entry);
}

static void add_strings(DBusMessageIter *fields, const char *key, const char *value) {
    DBusMessageIter entry, variant, array;
    cnm_d.dbus_message_iter_open_container(fields, T_DICT_ENTRY, NULL, &entry);
    cnm_d.dbus_message_iter_append_basic(&entry, T_STRING, &key);
    cnm_d.dbus_message_iter_open_container(&entry, T_VARIANT, "as", &variant);
    cnm_d.dbus_message_iter_open_container(&variant, T_ARRAY, "s", &array);
    cnm_d.dbus_message_iter_append_basic(&array, T_STRING, &value);
    cnm_d.dbus_message_iter_close_container(&variant, &array);
    cnm_d.dbus_message_iter_close_container(&entry, &variant);
    cnm_d.dbus_message_iter_close_container(fields, &entry);
}

int cnm_activate(cnm *m, const char *device, const uint8_t *ssid, size_t ssid_length, const char *passphrase,
                 int access_point, uint32_t channel, int hidden, char *connection, char *active, size_t path_size,
                 char *error, size_t size) {
    if (!access_point) m->failed_reason = 0;  // a new join: an earlier one's failure is not its own
    DBusMessage *message = cnm_d.dbus_message_new_method_call(NM, NM_PATH, NM, "AddAndActivateConnection2");
    if (message) {
        DBusMessageIter arguments, settings, entry, fields;
        cnm_d.dbus_message_iter_init_append(message, &arguments);
        cnm_d.dbus_message_iter_open_container(&arguments, T_ARRAY, "{sa{sv}}", &settings);
        open_section(&settings, "connection", &entry, &fields);
        add_string(&fields, "id", access_point ? "replenish-setup" : "replenish-home");
        add_string(&fields, "type", "802-11-wireless");
        add_bool(&fields, "autoconnect", !access_point);
        close_section(&settings, &entry, &fields);
        open_section(&settings, "802-11-wireless", &entry, &fields);
        add_bytes(&fields, "ssid", ssid, ssid_length);
        add_string(&fields, "mode", access_point ? "ap" : "infrastructure");
        if (access_point) add_string(&fields, "band", channel > 14 ? "a" : "bg");
        if (access_point && channel > 0) add_field(&fields, "channel", T_UINT32, &channel);
        if (hidden && !access_point) add_bool(&fields, "hidden", 1);
        close_section(&settings, &entry, &fields);
        if (passphrase) {
            open_section(&settings, "802-11-wireless-security", &entry, &fields);
            add_string(&fields, "key-mgmt", "wpa-psk");
            add_string(&fields, "psk", passphrase);
            if (access_point) {
                add_strings(&fields, "proto", "rsn");
                add_strings(&fields, "pairwise", "ccmp");
                add_strings(&fields, "group", "ccmp");
            }
            close_section(&settings, &entry, &fields);
        }
        open_section(&settings, "ipv4", &entry, &fields);
        add_string(&fields, "method", access_point ? "shared" : "auto");
        close_section(&settings, &entry, &fields);
        open_section(&settings, "ipv6", &entry, &fields);
        add_string(&fields, "method", access_point ? "ignore" : "auto");
        close_section(&settings, &entry, &fields);
        cnm_d.dbus_message_iter_close_container(&arguments, &settings);
        const char *specific = "/";
        cnm_d.dbus_message_iter_append_basic(&arguments, T_OBJECT_PATH, &device);
        cnm_d.dbus_message_iter_append_basic(&arguments, T_OBJECT_PATH, &specific);
        DBusMessageIter options;
        cnm_d.dbus_message_iter_open_container(&arguments, T_ARRAY, "{sv}", &options);
        // The access point's connection lives in memory only; the home network's is saved by NetworkManager.
        add_string(&options, "persist", access_point ? "volatile" : "disk");
        cnm_d.dbus_message_iter_close_container(&arguments, &options);
    }
    DBusMessage *reply = cnm_call(m, message, "AddAndActivateConnection2", error, size);
    if (!reply) return CNM_FAILED;
    DBusMessageIter answer;
    int result = CNM_FAILED;
    if (cnm_d.dbus_message_iter_init(reply, &answer) &&
        cnm_d.dbus_message_iter_get_arg_type(&answer) == T_OBJECT_PATH) {
        const char *path = NULL;
        cnm_d.dbus_message_iter_get_basic(&answer, &path);
        snprintf(connection, path_size, "%s", path);
    }
    if (cnm_d.dbus_message_iter_init(reply, &answer) && cnm_d.dbus_message_iter_next(&answer) &&
        cnm_d.dbus_message_iter_get_arg_type(&answer) == T_OBJECT_PATH) {
        const char *path = NULL;
        cnm_d.dbus_message_iter_get_basic(&answer, &path);
        snprintf(active, path_size, "%s", path);
        result = 0;
    } else {
        cnm_fail(error, size, "NetworkManager's answer to AddAndActivateConnection2 has no active connection", NULL);
    }
    cnm_d.dbus_message_unref(reply);
    return result;
}

int cnm_deactivate(cnm *m, const char *active, char *error, size_t size) {
    DBusMessage *message = cnm_d.dbus_message_new_method_call(NM, NM_PATH, NM, "DeactivateConnection");
    if (message) {
        DBusMessageIter arguments;
        cnm_d.dbus_message_iter_init_append(message, &arguments);
        cnm_d.dbus_message_iter_append_basic(&arguments, T_OBJECT_PATH, &active);
    }
    DBusMessage *reply = cnm_call(m, message, "DeactivateConnection", error, size);
    if (reply) {
        cnm_d.dbus_message_unref(reply);
        return 0;
    }
    // Already gone (it failed, or NetworkManager took the device back): nothing to deactivate.
    return strstr(error, "ConnectionNotActive") || strstr(error, "UnknownObject") || strstr(error, "UnknownMethod")
               ? 0
               : CNM_FAILED;
}

int cnm_delete_connection(cnm *m, const char *connection, char *error, size_t size) {
    DBusMessage *message =
        cnm_d.dbus_message_new_method_call(NM, connection, "org.freedesktop.NetworkManager.Settings.Connection",
                                           "Delete");
    DBusMessage *reply = cnm_call(m, message, "Delete", error, size);
    if (reply) {
        cnm_d.dbus_message_unref(reply);
        return 0;
    }
    return strstr(error, "UnknownObject") || strstr(error, "UnknownMethod") ? 0 : CNM_FAILED;
}

int cnm_reconnect(cnm *m, const char *device, char *connection, size_t path_size, char *error, size_t size) {
    connection[0] = 0;
    // Only a device that is disconnected (30) or failed (120): one that is joining, connected or unavailable
    // (no radio) is left to NetworkManager.
    uint32_t state = 0;
    if (cnm_get_u32(m, device, "org.freedesktop.NetworkManager.Device", "State", &state, error, size) != 0)
        return CNM_FAILED;
    if (state != 30 && state != 120) return 1;
    // The device's available connections: the saved ones it could join now (a network in range), whether or not
    // NetworkManager's autoconnect has given up on them.
    DBusMessageIter value, paths;
    DBusMessage *reply = cnm_get_property(m, device, "org.freedesktop.NetworkManager.Device", "AvailableConnections",
                                          &value, error, size);
    if (!reply) return CNM_FAILED;
    if (cnm_d.dbus_message_iter_get_arg_type(&value) == T_ARRAY) {
        cnm_d.dbus_message_iter_recurse(&value, &paths);
        while (!connection[0] && cnm_d.dbus_message_iter_get_arg_type(&paths) == T_OBJECT_PATH) {
            const char *object = NULL;
            cnm_d.dbus_message_iter_get_basic(&paths, &object);
            if (object && cnm_is_station_wifi(m, object)) snprintf(connection, path_size, "%s", object);
            cnm_d.dbus_message_iter_next(&paths);
        }
    }
    cnm_d.dbus_message_unref(reply);
    if (!connection[0]) return 1;
    const char *specific = "/";
    const char *saved = connection;
    DBusMessage *message = cnm_d.dbus_message_new_method_call(NM, NM_PATH, NM, "ActivateConnection");
    if (message) {
        DBusMessageIter arguments;
        cnm_d.dbus_message_iter_init_append(message, &arguments);
        cnm_d.dbus_message_iter_append_basic(&arguments, T_OBJECT_PATH, &saved);
        cnm_d.dbus_message_iter_append_basic(&arguments, T_OBJECT_PATH, &device);
        cnm_d.dbus_message_iter_append_basic(&arguments, T_OBJECT_PATH, &specific);
    }
    reply = cnm_call(m, message, "ActivateConnection", error, size);
    if (!reply) return CNM_FAILED;
    cnm_d.dbus_message_unref(reply);
    return 0;
}
