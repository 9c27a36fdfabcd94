#include "cnm.h"

#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// libdbus-1 is loaded when setup mode is first needed, with dlopen, not linked (like libavahi-client in CAvahi):
// a unit on its network never maps it. Unlike CAvahi's, it is never unloaded: a setup mode that woke follows
// NetworkManager until the agent stops (an outage opens the access point again, docs/wifi-setup.md), so its
// connection and the library are in use for the rest of the run. Its headers are not needed either: the few types
// below are the ones libdbus-1 has kept unchanged since 1.0 (its ABI is stable: dbus-message.h, dbus-errors.h,
// dbus-protocol.h).
typedef uint32_t dbus_bool_t;
typedef struct DBusConnection DBusConnection;
typedef struct DBusMessage DBusMessage;
typedef struct {
    const char *name;
    const char *message;
    unsigned int dummy1 : 1, dummy2 : 1, dummy3 : 1, dummy4 : 1, dummy5 : 1;
    void *padding1;
} DBusError;
typedef struct {
    void *dummy1, *dummy2;
    uint32_t dummy3;
    int dummy4, dummy5, dummy6, dummy7, dummy8, dummy9, dummy10, dummy11, pad1;
    void *pad2, *pad3;
} DBusMessageIter;
enum { DBUS_BUS_SYSTEM = 1, DBUS_MESSAGE_TYPE_SIGNAL = 4 };
enum {
    T_INVALID = 0, T_BYTE = 'y', T_BOOLEAN = 'b', T_UINT32 = 'u', T_STRING = 's', T_OBJECT_PATH = 'o',
    T_ARRAY = 'a', T_VARIANT = 'v', T_STRUCT = 'r', T_DICT_ENTRY = 'e'
};

#define CNM_SYMBOLS(X)                                                                                                 \
    X(dbus_error_init, void, (DBusError *))                                                                           \
    X(dbus_error_free, void, (DBusError *))                                                                           \
    X(dbus_error_is_set, dbus_bool_t, (const DBusError *))                                                            \
    X(dbus_bus_get_private, DBusConnection *, (int, DBusError *))                                                     \
    X(dbus_bus_add_match, void, (DBusConnection *, const char *, DBusError *))                                        \
    X(dbus_bus_register, dbus_bool_t, (DBusConnection *, DBusError *))                                                \
    X(dbus_connection_open_private, DBusConnection *, (const char *, DBusError *))                                    \
    X(dbus_connection_set_exit_on_disconnect, void, (DBusConnection *, dbus_bool_t))                                  \
    X(dbus_connection_close, void, (DBusConnection *))                                                                \
    X(dbus_connection_unref, void, (DBusConnection *))                                                                \
    X(dbus_connection_read_write, dbus_bool_t, (DBusConnection *, int))                                               \
    X(dbus_connection_get_unix_fd, dbus_bool_t, (DBusConnection *, int *))                                            \
    X(dbus_connection_pop_message, DBusMessage *, (DBusConnection *))                                                 \
    X(dbus_connection_send_with_reply_and_block, DBusMessage *, (DBusConnection *, DBusMessage *, int, DBusError *)) \
    X(dbus_message_new_method_call, DBusMessage *, (const char *, const char *, const char *, const char *))          \
    X(dbus_message_get_type, int, (DBusMessage *))                                                                    \
    X(dbus_message_is_signal, dbus_bool_t, (DBusMessage *, const char *, const char *))                               \
    X(dbus_message_get_path, const char *, (DBusMessage *))                                                           \
    X(dbus_message_unref, void, (DBusMessage *))                                                                      \
    X(dbus_message_iter_init, dbus_bool_t, (DBusMessage *, DBusMessageIter *))                                        \
    X(dbus_message_iter_init_append, void, (DBusMessage *, DBusMessageIter *))                                        \
    X(dbus_message_iter_append_basic, dbus_bool_t, (DBusMessageIter *, int, const void *))                            \
    X(dbus_message_iter_append_fixed_array, dbus_bool_t, (DBusMessageIter *, int, const void *, int))                 \
    X(dbus_message_iter_open_container, dbus_bool_t, (DBusMessageIter *, int, const char *, DBusMessageIter *))       \
    X(dbus_message_iter_close_container, dbus_bool_t, (DBusMessageIter *, DBusMessageIter *))                         \
    X(dbus_message_iter_get_arg_type, int, (DBusMessageIter *))                                                       \
    X(dbus_message_iter_get_basic, void, (DBusMessageIter *, void *))                                                 \
    X(dbus_message_iter_get_fixed_array, void, (DBusMessageIter *, void *, int *))                                    \
    X(dbus_message_iter_recurse, void, (DBusMessageIter *, DBusMessageIter *))                                        \
    X(dbus_message_iter_next, dbus_bool_t, (DBusMessageIter *))

static struct {
#define CNM_POINTER(name, result, arguments) result(*name) arguments;
    CNM_SYMBOLS(CNM_POINTER)
#undef CNM_POINTER
} d;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int loaded;

static void load(void) {
    void *library = dlopen("libdbus-1.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!library) return;
#define CNM_LOOKUP(name, result, arguments)                                                                            \
    if (!(d.name = (result(*) arguments)dlsym(library, #name))) return;
    CNM_SYMBOLS(CNM_LOOKUP)
#undef CNM_LOOKUP
    loaded = 1;
}

struct cnm {
    DBusConnection *bus;
    // An eventfd that ends a wait at once (cnm_wake): a call for the thread that waits need not sit out the wait.
    int wake;
    // The reason of the last device that went to NM_DEVICE_STATE_FAILED (120), from its StateChanged signal: the
    // device's StateReason property has moved on (to "disconnected", reason none) by the time a join's end is
    // read, so the reason a wrong passphrase gave is kept here.
    uint32_t failed_reason;
    char failed_device[256];
};

static int drain(cnm *m);

static const char *const NM = "org.freedesktop.NetworkManager";
static const char *const NM_PATH = "/org/freedesktop/NetworkManager";
static const char *const PROPERTIES = "org.freedesktop.DBus.Properties";

static int fail(char *error, size_t size, const char *what, DBusError *bus_error) {
    if (error && size) {
        if (bus_error && d.dbus_error_is_set(bus_error))
            snprintf(error, size, "%s: %s (%s)", what, bus_error->message ? bus_error->message : "",
                     bus_error->name ? bus_error->name : "");
        else
            snprintf(error, size, "%s", what);
    }
    if (bus_error) d.dbus_error_free(bus_error);
    return CNM_FAILED;
}

/// Sends `message` (consumed) and waits for the reply; NULL with `error` set on failure.
static DBusMessage *call(cnm *m, DBusMessage *message, const char *what, char *error, size_t size) {
    if (!message) {
        fail(error, size, "out of memory", NULL);
        return NULL;
    }
    DBusError bus_error;
    d.dbus_error_init(&bus_error);
    DBusMessage *reply = d.dbus_connection_send_with_reply_and_block(m->bus, message, CNM_TIMEOUT_MS, &bus_error);
    d.dbus_message_unref(message);
    if (!reply) fail(error, size, what, &bus_error);
    return reply;
}

/// Properties.Get(interface, name) on `path`: the reply, with `value` inside its variant.
static DBusMessage *get_property(cnm *m, const char *path, const char *interface, const char *name,
                                 DBusMessageIter *value, char *error, size_t size) {
    DBusMessage *message = d.dbus_message_new_method_call(NM, path, PROPERTIES, "Get");
    if (message) {
        DBusMessageIter arguments;
        d.dbus_message_iter_init_append(message, &arguments);
        d.dbus_message_iter_append_basic(&arguments, T_STRING, &interface);
        d.dbus_message_iter_append_basic(&arguments, T_STRING, &name);
    }
    DBusMessage *reply = call(m, message, name, error, size);
    if (!reply) return NULL;
    DBusMessageIter variant;
    if (!d.dbus_message_iter_init(reply, &variant) || d.dbus_message_iter_get_arg_type(&variant) != T_VARIANT) {
        d.dbus_message_unref(reply);
        fail(error, size, "NetworkManager answered a property that is not a variant", NULL);
        return NULL;
    }
    d.dbus_message_iter_recurse(&variant, value);
    return reply;
}

static int get_u32(cnm *m, const char *path, const char *interface, const char *name, uint32_t *out, char *error,
                   size_t size) {
    DBusMessageIter value;
    DBusMessage *reply = get_property(m, path, interface, name, &value, error, size);
    if (!reply) return CNM_FAILED;
    int ok = d.dbus_message_iter_get_arg_type(&value) == T_UINT32;
    if (ok) d.dbus_message_iter_get_basic(&value, out);
    d.dbus_message_unref(reply);
    return ok ? 0 : fail(error, size, "NetworkManager answered a property of another type", NULL);
}

cnm *cnm_open(const char *address, char *error, size_t size) {
    pthread_once(&load_once, load);
    if (!loaded) {
        fail(error, size, "libdbus-1 is not installed (libdbus-1-3)", NULL);
        return NULL;
    }
    DBusError bus_error;
    d.dbus_error_init(&bus_error);
    DBusConnection *bus = address ? d.dbus_connection_open_private(address, &bus_error)
                                  : d.dbus_bus_get_private(DBUS_BUS_SYSTEM, &bus_error);
    if (!bus) {
        fail(error, size, "no system bus", &bus_error);
        return NULL;
    }
    if (address && !d.dbus_bus_register(bus, &bus_error)) {
        fail(error, size, "the bus refused this connection", &bus_error);
        d.dbus_connection_close(bus);
        d.dbus_connection_unref(bus);
        return NULL;
    }
    d.dbus_connection_set_exit_on_disconnect(bus, 0);
    cnm *m = calloc(1, sizeof *m);
    if (!m) {
        d.dbus_connection_close(bus);
        d.dbus_connection_unref(bus);
        fail(error, size, "out of memory", NULL);
        return NULL;
    }
    m->bus = bus;
    m->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (m->wake < 0) {
        fail(error, size, "no eventfd", NULL);
        cnm_close(m);
        return NULL;
    }
    uint32_t state = 0;
    if (get_u32(m, NM_PATH, NM, "State", &state, error, size) != 0) {
        cnm_close(m);
        return NULL;
    }
    const char *rules[] = {
        "type='signal',sender='org.freedesktop.NetworkManager'",
        "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='org.freedesktop.NetworkManager'",
    };
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
        d.dbus_error_init(&bus_error);
        d.dbus_bus_add_match(bus, rules[i], &bus_error);
        if (d.dbus_error_is_set(&bus_error)) {
            fail(error, size, "could not subscribe to NetworkManager's signals", &bus_error);
            cnm_close(m);
            return NULL;
        }
    }
    return m;
}

void cnm_close(cnm *m) {
    if (!m) return;
    if (m->wake > 0) close(m->wake);
    d.dbus_connection_close(m->bus);
    d.dbus_connection_unref(m->bus);
    free(m);
}

int cnm_state(cnm *m, uint32_t *state, uint32_t *connectivity, char *error, size_t size) {
    if (get_u32(m, NM_PATH, NM, "State", state, error, size) != 0) return CNM_FAILED;
    return get_u32(m, NM_PATH, NM, "Connectivity", connectivity, error, size);
}

/// Calls `method` of `interface` on `path` with no arguments and hands each object path of its `ao` answer to
/// `each` (which returns nonzero to stop).
static int each_path(cnm *m, const char *path, const char *interface, const char *method,
                     int (*each)(cnm *, const char *, void *), void *context, char *error, size_t size) {
    DBusMessage *reply = call(m, d.dbus_message_new_method_call(NM, path, interface, method), method, error, size);
    if (!reply) return CNM_FAILED;
    DBusMessageIter answer, paths;
    int result = 0;
    if (d.dbus_message_iter_init(reply, &answer) && d.dbus_message_iter_get_arg_type(&answer) == T_ARRAY) {
        d.dbus_message_iter_recurse(&answer, &paths);
        while (d.dbus_message_iter_get_arg_type(&paths) == T_OBJECT_PATH) {
            const char *object = NULL;
            d.dbus_message_iter_get_basic(&paths, &object);
            if ((result = each(m, object, context)) != 0) break;
            d.dbus_message_iter_next(&paths);
        }
    } else {
        result = fail(error, size, "NetworkManager answered something other than a list of objects", NULL);
    }
    d.dbus_message_unref(reply);
    return result < 0 ? result : 0;
}

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
    if (get_u32(m, object, "org.freedesktop.NetworkManager.Device", "DeviceType", &type, ignored, sizeof ignored) != 0 ||
        type != 2)
        return 0;
    if (search->interface[0]) {
        DBusMessageIter value;
        DBusMessage *reply = get_property(m, object, "org.freedesktop.NetworkManager.Device", "Interface", &value,
                                          ignored, sizeof ignored);
        if (!reply) return 0;
        const char *name = "";
        if (d.dbus_message_iter_get_arg_type(&value) == T_STRING) d.dbus_message_iter_get_basic(&value, &name);
        int same = strcmp(name, search->interface) == 0;
        d.dbus_message_unref(reply);
        if (!same) return 0;
    }
    snprintf(search->path, search->path_size, "%s", object);
    search->found = 1;
    return 1;
}

int cnm_wifi_device(cnm *m, const char *interface, char *path, size_t path_size, char *error, size_t size) {
    struct device_search search = {interface ? interface : "", path, path_size, 0};
    if (each_path(m, NM_PATH, NM, "GetDevices", match_device, &search, error, size) != 0) return CNM_FAILED;
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
    while (d.dbus_message_iter_get_arg_type(&entries) == T_DICT_ENTRY) {
        DBusMessageIter entry, variant;
        d.dbus_message_iter_recurse(&entries, &entry);
        const char *name = NULL;
        if (d.dbus_message_iter_get_arg_type(&entry) == T_STRING) {
            d.dbus_message_iter_get_basic(&entry, &name);
            d.dbus_message_iter_next(&entry);
            if (name && strcmp(name, key) == 0) {
                if (d.dbus_message_iter_get_arg_type(&entry) == T_VARIANT) {
                    d.dbus_message_iter_recurse(&entry, &variant);
                    *value = variant;
                } else {
                    *value = entry;
                }
                return 1;
            }
        }
        d.dbus_message_iter_next(&entries);
    }
    return 0;
}

static const char *string_in(DBusMessageIter *dict, const char *key) {
    DBusMessageIter value;
    const char *text = NULL;
    if (find_key(dict, key, &value) && d.dbus_message_iter_get_arg_type(&value) == T_STRING)
        d.dbus_message_iter_get_basic(&value, &text);
    return text;
}

/// 1 when the saved connection at `object` is a Wi-Fi station's (not an access point's, mode `ap`).
static int is_station_wifi(cnm *m, const char *object) {
    char ignored[256];
    DBusMessage *reply = call(m,
                              d.dbus_message_new_method_call(NM, object,
                                                             "org.freedesktop.NetworkManager.Settings.Connection",
                                                             "GetSettings"),
                              "GetSettings", ignored, sizeof ignored);
    if (!reply) return 0;
    int station = 0;
    DBusMessageIter answer, sections, section, wireless;
    if (d.dbus_message_iter_init(reply, &answer) && d.dbus_message_iter_get_arg_type(&answer) == T_ARRAY) {
        d.dbus_message_iter_recurse(&answer, &sections);
        const char *type = NULL, *mode = NULL;
        if (find_key(&sections, "connection", &section) && d.dbus_message_iter_get_arg_type(&section) == T_ARRAY) {
            DBusMessageIter fields;
            d.dbus_message_iter_recurse(&section, &fields);
            type = string_in(&fields, "type");
        }
        if (find_key(&sections, "802-11-wireless", &wireless) &&
            d.dbus_message_iter_get_arg_type(&wireless) == T_ARRAY) {
            DBusMessageIter fields;
            d.dbus_message_iter_recurse(&wireless, &fields);
            mode = string_in(&fields, "mode");
        }
        station = type && strcmp(type, "802-11-wireless") == 0 && !(mode && strcmp(mode, "ap") == 0);
    }
    d.dbus_message_unref(reply);
    return station;
}

static int count_saved(cnm *m, const char *object, void *context) {
    if (is_station_wifi(m, object)) (*(int *)context)++;
    return 0;
}

int cnm_saved_wifi(cnm *m, int *count, char *error, size_t size) {
    *count = 0;
    return each_path(m, "/org/freedesktop/NetworkManager/Settings", "org.freedesktop.NetworkManager.Settings",
                     "ListConnections", count_saved, count, error, size);
}

struct network_list {
    cnm_network_callback callback;
    void *userdata;
};

static int report_network(cnm *m, const char *object, void *context) {
    struct network_list *list = context;
    char ignored[256];
    DBusMessage *message = d.dbus_message_new_method_call(NM, object, PROPERTIES, "GetAll");
    if (message) {
        const char *interface = "org.freedesktop.NetworkManager.AccessPoint";
        DBusMessageIter arguments;
        d.dbus_message_iter_init_append(message, &arguments);
        d.dbus_message_iter_append_basic(&arguments, T_STRING, &interface);
    }
    DBusMessage *reply = call(m, message, "GetAll", ignored, sizeof ignored);
    if (!reply) return 0;
    DBusMessageIter answer, properties, value;
    if (d.dbus_message_iter_init(reply, &answer) && d.dbus_message_iter_get_arg_type(&answer) == T_ARRAY) {
        d.dbus_message_iter_recurse(&answer, &properties);
        const uint8_t *ssid = NULL;
        int ssid_length = 0;
        uint8_t strength = 0;
        uint32_t flags = 0, wpa = 0, rsn = 0, frequency = 0;
        if (find_key(&properties, "Ssid", &value) && d.dbus_message_iter_get_arg_type(&value) == T_ARRAY) {
            DBusMessageIter bytes;
            d.dbus_message_iter_recurse(&value, &bytes);
            if (d.dbus_message_iter_get_arg_type(&bytes) == T_BYTE)
                d.dbus_message_iter_get_fixed_array(&bytes, &ssid, &ssid_length);
        }
        if (find_key(&properties, "Strength", &value) && d.dbus_message_iter_get_arg_type(&value) == T_BYTE)
            d.dbus_message_iter_get_basic(&value, &strength);
        if (find_key(&properties, "Flags", &value) && d.dbus_message_iter_get_arg_type(&value) == T_UINT32)
            d.dbus_message_iter_get_basic(&value, &flags);
        if (find_key(&properties, "WpaFlags", &value) && d.dbus_message_iter_get_arg_type(&value) == T_UINT32)
            d.dbus_message_iter_get_basic(&value, &wpa);
        if (find_key(&properties, "RsnFlags", &value) && d.dbus_message_iter_get_arg_type(&value) == T_UINT32)
            d.dbus_message_iter_get_basic(&value, &rsn);
        if (find_key(&properties, "Frequency", &value) && d.dbus_message_iter_get_arg_type(&value) == T_UINT32)
            d.dbus_message_iter_get_basic(&value, &frequency);
        // NM_802_11_AP_SEC_KEY_MGMT_802_1X (0x200): enterprise; privacy without WPA or RSN: WEP. Neither is offered.
        int secured = (wpa | rsn) != 0;
        int unsupported = ((wpa | rsn) & 0x200) != 0 || (!secured && (flags & 0x1));
        if (ssid && ssid_length > 0)
            list->callback(ssid, (size_t)ssid_length, strength, frequency, secured, unsupported, list->userdata);
    }
    d.dbus_message_unref(reply);
    return 0;
}

int cnm_networks(cnm *m, const char *device, cnm_network_callback callback, void *userdata, char *error,
                 size_t size) {
    const char *wireless = "org.freedesktop.NetworkManager.Device.Wireless";
    DBusMessage *scan = d.dbus_message_new_method_call(NM, device, wireless, "RequestScan");
    if (scan) {
        DBusMessageIter arguments, options;
        d.dbus_message_iter_init_append(scan, &arguments);
        d.dbus_message_iter_open_container(&arguments, T_ARRAY, "{sv}", &options);
        d.dbus_message_iter_close_container(&arguments, &options);
    }
    char ignored[256];
    DBusMessage *scanned = call(m, scan, "RequestScan", ignored, sizeof ignored);
    if (scanned) d.dbus_message_unref(scanned);
    struct network_list list = {callback, userdata};
    return each_path(m, device, wireless, "GetAllAccessPoints", report_network, &list, error, size);
}

// Building `a{sa{sv}}`: a section (`s` and its `a{sv}`), and a field of it.
static void open_section(DBusMessageIter *settings, const char *name, DBusMessageIter *entry, DBusMessageIter *fields) {
    d.dbus_message_iter_open_container(settings, T_DICT_ENTRY, NULL, entry);
    d.dbus_message_iter_append_basic(entry, T_STRING, &name);
    d.dbus_message_iter_open_container(entry, T_ARRAY, "{sv}", fields);
}

static void close_section(DBusMessageIter *settings, DBusMessageIter *entry, DBusMessageIter *fields) {
    d.dbus_message_iter_close_container(entry, fields);
    d.dbus_message_iter_close_container(settings, entry);
}

static void add_field(DBusMessageIter *fields, const char *key, int type, const void *value) {
    DBusMessageIter entry, variant;
    char signature[2] = {(char)type, 0};
    d.dbus_message_iter_open_container(fields, T_DICT_ENTRY, NULL, &entry);
    d.dbus_message_iter_append_basic(&entry, T_STRING, &key);
    d.dbus_message_iter_open_container(&entry, T_VARIANT, signature, &variant);
    d.dbus_message_iter_append_basic(&variant, type, value);
    d.dbus_message_iter_close_container(&entry, &variant);
    d.dbus_message_iter_close_container(fields, &entry);
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
    d.dbus_message_iter_open_container(fields, T_DICT_ENTRY, NULL, &entry);
    d.dbus_message_iter_append_basic(&entry, T_STRING, &key);
    d.dbus_message_iter_open_container(&entry, T_VARIANT, "ay", &variant);
    d.dbus_message_iter_open_container(&variant, T_ARRAY, "y", &array);
    d.dbus_message_iter_append_fixed_array(&array, T_BYTE, &bytes, (int)length);
    d.dbus_message_iter_close_container(&variant, &array);
    d.dbus_message_iter_close_container(&entry, &variant);
    d.dbus_message_iter_close_container(fields, &entry);
}

static void add_strings(DBusMessageIter *fields, const char *key, const char *value) {
    DBusMessageIter entry, variant, array;
    d.dbus_message_iter_open_container(fields, T_DICT_ENTRY, NULL, &entry);
    d.dbus_message_iter_append_basic(&entry, T_STRING, &key);
    d.dbus_message_iter_open_container(&entry, T_VARIANT, "as", &variant);
    d.dbus_message_iter_open_container(&variant, T_ARRAY, "s", &array);
    d.dbus_message_iter_append_basic(&array, T_STRING, &value);
    d.dbus_message_iter_close_container(&variant, &array);
    d.dbus_message_iter_close_container(&entry, &variant);
    d.dbus_message_iter_close_container(fields, &entry);
}

int cnm_activate(cnm *m, const char *device, const uint8_t *ssid, size_t ssid_length, const char *passphrase,
                 int access_point, uint32_t channel, int hidden, char *connection, char *active, size_t path_size,
                 char *error, size_t size) {
    if (!access_point) m->failed_reason = 0;  // a new join: an earlier one's failure is not its own
    DBusMessage *message = d.dbus_message_new_method_call(NM, NM_PATH, NM, "AddAndActivateConnection2");
    if (message) {
        DBusMessageIter arguments, settings, entry, fields;
        d.dbus_message_iter_init_append(message, &arguments);
        d.dbus_message_iter_open_container(&arguments, T_ARRAY, "{sa{sv}}", &settings);
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
        d.dbus_message_iter_close_container(&arguments, &settings);
        const char *specific = "/";
        d.dbus_message_iter_append_basic(&arguments, T_OBJECT_PATH, &device);
        d.dbus_message_iter_append_basic(&arguments, T_OBJECT_PATH, &specific);
        DBusMessageIter options;
        d.dbus_message_iter_open_container(&arguments, T_ARRAY, "{sv}", &options);
        // The access point's connection lives in memory only; the home network's is saved by NetworkManager.
        add_string(&options, "persist", access_point ? "volatile" : "disk");
        d.dbus_message_iter_close_container(&arguments, &options);
    }
    DBusMessage *reply = call(m, message, "AddAndActivateConnection2", error, size);
    if (!reply) return CNM_FAILED;
    DBusMessageIter answer;
    int result = CNM_FAILED;
    if (d.dbus_message_iter_init(reply, &answer) && d.dbus_message_iter_get_arg_type(&answer) == T_OBJECT_PATH) {
        const char *path = NULL;
        d.dbus_message_iter_get_basic(&answer, &path);
        snprintf(connection, path_size, "%s", path);
    }
    if (d.dbus_message_iter_init(reply, &answer) && d.dbus_message_iter_next(&answer) &&
        d.dbus_message_iter_get_arg_type(&answer) == T_OBJECT_PATH) {
        const char *path = NULL;
        d.dbus_message_iter_get_basic(&answer, &path);
        snprintf(active, path_size, "%s", path);
        result = 0;
    } else {
        fail(error, size, "NetworkManager's answer to AddAndActivateConnection2 has no active connection", NULL);
    }
    d.dbus_message_unref(reply);
    return result;
}

int cnm_deactivate(cnm *m, const char *active, char *error, size_t size) {
    DBusMessage *message = d.dbus_message_new_method_call(NM, NM_PATH, NM, "DeactivateConnection");
    if (message) {
        DBusMessageIter arguments;
        d.dbus_message_iter_init_append(message, &arguments);
        d.dbus_message_iter_append_basic(&arguments, T_OBJECT_PATH, &active);
    }
    DBusMessage *reply = call(m, message, "DeactivateConnection", error, size);
    if (reply) {
        d.dbus_message_unref(reply);
        return 0;
    }
    // Already gone (it failed, or NetworkManager took the device back): nothing to deactivate.
    return strstr(error, "ConnectionNotActive") || strstr(error, "UnknownObject") || strstr(error, "UnknownMethod")
               ? 0
               : CNM_FAILED;
}

int cnm_delete_connection(cnm *m, const char *connection, char *error, size_t size) {
    DBusMessage *message =
        d.dbus_message_new_method_call(NM, connection, "org.freedesktop.NetworkManager.Settings.Connection", "Delete");
    DBusMessage *reply = call(m, message, "Delete", error, size);
    if (reply) {
        d.dbus_message_unref(reply);
        return 0;
    }
    return strstr(error, "UnknownObject") || strstr(error, "UnknownMethod") ? 0 : CNM_FAILED;
}

int cnm_reconnect(cnm *m, const char *device, char *connection, size_t path_size, char *error, size_t size) {
    connection[0] = 0;
    // Only a device that is disconnected (30) or failed (120): one that is joining, connected or unavailable
    // (no radio) is left to NetworkManager.
    uint32_t state = 0;
    if (get_u32(m, device, "org.freedesktop.NetworkManager.Device", "State", &state, error, size) != 0)
        return CNM_FAILED;
    if (state != 30 && state != 120) return 1;
    // The device's available connections: the saved ones it could join now (a network in range), whether or not
    // NetworkManager's autoconnect has given up on them.
    DBusMessageIter value, paths;
    DBusMessage *reply = get_property(m, device, "org.freedesktop.NetworkManager.Device", "AvailableConnections",
                                      &value, error, size);
    if (!reply) return CNM_FAILED;
    if (d.dbus_message_iter_get_arg_type(&value) == T_ARRAY) {
        d.dbus_message_iter_recurse(&value, &paths);
        while (!connection[0] && d.dbus_message_iter_get_arg_type(&paths) == T_OBJECT_PATH) {
            const char *object = NULL;
            d.dbus_message_iter_get_basic(&paths, &object);
            if (object && is_station_wifi(m, object)) snprintf(connection, path_size, "%s", object);
            d.dbus_message_iter_next(&paths);
        }
    }
    d.dbus_message_unref(reply);
    if (!connection[0]) return 1;
    const char *specific = "/";
    const char *saved = connection;
    DBusMessage *message = d.dbus_message_new_method_call(NM, NM_PATH, NM, "ActivateConnection");
    if (message) {
        DBusMessageIter arguments;
        d.dbus_message_iter_init_append(message, &arguments);
        d.dbus_message_iter_append_basic(&arguments, T_OBJECT_PATH, &saved);
        d.dbus_message_iter_append_basic(&arguments, T_OBJECT_PATH, &device);
        d.dbus_message_iter_append_basic(&arguments, T_OBJECT_PATH, &specific);
    }
    reply = call(m, message, "ActivateConnection", error, size);
    if (!reply) return CNM_FAILED;
    d.dbus_message_unref(reply);
    return 0;
}

int cnm_active_state(cnm *m, const char *active, const char *device, uint32_t *state, uint32_t *reason, char *error,
                     size_t size) {
    *reason = 0;
    if (get_u32(m, active, "org.freedesktop.NetworkManager.Connection.Active", "State", state, error, size) != 0) {
        if (!strstr(error, "UnknownObject") && !strstr(error, "UnknownMethod")) return CNM_FAILED;
        *state = 4;
    }
    // The device's StateChanged signal came before the answer just read (the bus keeps their order): taken from
    // the queue now, so a join that ended is read with its reason.
    if (*state >= 3) {
        d.dbus_connection_read_write(m->bus, 0);
        drain(m);
    }
    if (*state >= 3 && m->failed_reason && strcmp(m->failed_device, device) == 0) {
        *reason = m->failed_reason;
        return 0;
    }
    DBusMessageIter value;
    char ignored[256];
    DBusMessage *reply = get_property(m, device, "org.freedesktop.NetworkManager.Device", "StateReason", &value,
                                      ignored, sizeof ignored);
    if (reply) {
        if (d.dbus_message_iter_get_arg_type(&value) == T_STRUCT) {
            DBusMessageIter fields;
            d.dbus_message_iter_recurse(&value, &fields);
            d.dbus_message_iter_next(&fields);
            if (d.dbus_message_iter_get_arg_type(&fields) == T_UINT32) d.dbus_message_iter_get_basic(&fields, reason);
        }
        d.dbus_message_unref(reply);
    }
    return 0;
}

// Pops every message the connection has queued; records a device's failure reason (StateChanged to 120); 1 when
// any of them was a signal.
static int drain(cnm *m) {
    int signalled = 0;
    DBusMessage *message;
    while ((message = d.dbus_connection_pop_message(m->bus))) {
        if (d.dbus_message_get_type(message) == DBUS_MESSAGE_TYPE_SIGNAL) signalled = 1;
        DBusMessageIter arguments;
        uint32_t states[3] = {0, 0, 0};  // new, old, reason
        if (d.dbus_message_is_signal(message, "org.freedesktop.NetworkManager.Device", "StateChanged") &&
            d.dbus_message_iter_init(message, &arguments)) {
            for (int i = 0; i < 3 && d.dbus_message_iter_get_arg_type(&arguments) == T_UINT32; i++) {
                d.dbus_message_iter_get_basic(&arguments, &states[i]);
                d.dbus_message_iter_next(&arguments);
            }
            const char *path = d.dbus_message_get_path(message);
            if (states[0] == 120 && path) {
                m->failed_reason = states[2];
                snprintf(m->failed_device, sizeof m->failed_device, "%s", path);
            }
        }
        d.dbus_message_unref(message);
    }
    return signalled;
}

int cnm_wait(cnm *m, int timeout_ms) {
    // What has arrived already (a signal read during a call sits in the queue) is taken first.
    if (!d.dbus_connection_read_write(m->bus, 0)) return CNM_FAILED;
    if (drain(m)) return 1;
    int fd = -1;
    if (!d.dbus_connection_get_unix_fd(m->bus, &fd)) return CNM_FAILED;
    struct pollfd fds[2] = {{.fd = fd, .events = POLLIN}, {.fd = m->wake, .events = POLLIN}};
    if (poll(fds, 2, timeout_ms) > 0 && (fds[1].revents & POLLIN)) {
        uint64_t count;
        (void)!read(m->wake, &count, sizeof count);
    }
    if (!d.dbus_connection_read_write(m->bus, 0)) return CNM_FAILED;
    return drain(m);
}

void cnm_wake(cnm *m) {
    uint64_t one = 1;
    (void)!write(m->wake, &one, sizeof one);
}
