// What the files of CNetworkManager share, and Swift does not see (it imports include/cnm.h only): libdbus-1's
// types and functions (loaded by cnm_library.c), the connection's object, and the helpers of cnm_message.c that
// make a call to NetworkManager and read its answer. The public calls are in cnm.c (the connection and its signals),
// cnm_devices.c (what NetworkManager knows) and cnm_connections.c (the connections the setup mode makes and ends).
#ifndef CNM_INTERNAL_H
#define CNM_INTERNAL_H

#include "cnm.h"

// libdbus-1's headers are not needed: the few types below are the ones libdbus-1 has kept unchanged since 1.0 (its
// ABI is stable: dbus-message.h, dbus-errors.h, dbus-protocol.h).
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

/// libdbus-1's functions, found by cnm_load; every other file calls libdbus-1 through them (`cnm_d.dbus_…`).
struct cnm_libdbus {
#define CNM_POINTER(name, result, arguments) result(*name) arguments;
    CNM_SYMBOLS(CNM_POINTER)
#undef CNM_POINTER
};
extern struct cnm_libdbus cnm_d;

/// Loads libdbus-1 and looks up every function of CNM_SYMBOLS, once: 1 when all were found.
int cnm_load(void);

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

static const char *const NM = "org.freedesktop.NetworkManager";
static const char *const NM_PATH = "/org/freedesktop/NetworkManager";
static const char *const PROPERTIES = "org.freedesktop.DBus.Properties";

// cnm_message.c: a call to NetworkManager and the reading of its answer.
int cnm_fail(char *error, size_t size, const char *what, DBusError *bus_error);
DBusMessage *cnm_call(cnm *m, DBusMessage *message, const char *what, char *error, size_t size);
DBusMessage *cnm_get_property(cnm *m, const char *path, const char *interface, const char *name,
                              DBusMessageIter *value, char *error, size_t size);
int cnm_get_u32(cnm *m, const char *path, const char *interface, const char *name, uint32_t *out, char *error,
                size_t size);
int cnm_each_path(cnm *m, const char *path, const char *interface, const char *method,
                  int (*each)(cnm *, const char *, void *), void *context, char *error, size_t size);

// cnm_devices.c, for cnm_reconnect.
int cnm_is_station_wifi(cnm *m, const char *object);

#endif
