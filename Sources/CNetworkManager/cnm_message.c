// A call to NetworkManager and the reading of its answer, for every public call: the error text, a call that waits for
// its reply, a property (Properties.Get) and a list of objects.
#include "cnm_internal.h"

#include <stdio.h>

int cnm_fail(char *error, size_t size, const char *what, DBusError *bus_error) {
    if (error && size) {
        if (bus_error && cnm_d.dbus_error_is_set(bus_error))
            snprintf(error, size, "%s: %s (%s)", what, bus_error->message ? bus_error->message : "",
                     bus_error->name ? bus_error->name : "");
        else
            snprintf(error, size, "%s", what);
    }
    if (bus_error) cnm_d.dbus_error_free(bus_error);
    return CNM_FAILED;
}

/// Sends `message` (consumed) and waits for the reply; NULL with `error` set on failure.
DBusMessage *cnm_call(cnm *m, DBusMessage *message, const char *what, char *error, size_t size) {
    if (!message) {
        cnm_fail(error, size, "out of memory", NULL);
        return NULL;
    }
    DBusError bus_error;
    cnm_d.dbus_error_init(&bus_error);
    DBusMessage *reply = cnm_d.dbus_connection_send_with_reply_and_block(m->bus, message, CNM_TIMEOUT_MS, &bus_error);
    cnm_d.dbus_message_unref(message);
    if (!reply) cnm_fail(error, size, what, &bus_error);
    return reply;
}

/// Properties.Get(interface, name) on `path`: the reply, with `value` inside its variant.
DBusMessage *cnm_get_property(cnm *m, const char *path, const char *interface, const char *name,
                              DBusMessageIter *value, char *error, size_t size) {
    DBusMessage *message = cnm_d.dbus_message_new_method_call(NM, path, PROPERTIES, "Get");
    if (message) {
        DBusMessageIter arguments;
        cnm_d.dbus_message_iter_init_append(message, &arguments);
        cnm_d.dbus_message_iter_append_basic(&arguments, T_STRING, &interface);
        cnm_d.dbus_message_iter_append_basic(&arguments, T_STRING, &name);
    }
    DBusMessage *reply = cnm_call(m, message, name, error, size);
    if (!reply) return NULL;
    DBusMessageIter variant;
    if (!cnm_d.dbus_message_iter_init(reply, &variant) || cnm_d.dbus_message_iter_get_arg_type(&variant) != T_VARIANT) {
        cnm_d.dbus_message_unref(reply);
        cnm_fail(error, size, "NetworkManager answered a property that is not a variant", NULL);
        return NULL;
    }
    cnm_d.dbus_message_iter_recurse(&variant, value);
    return reply;
}

int cnm_get_u32(cnm *m, const char *path, const char *interface, const char *name, uint32_t *out, char *error,
                size_t size) {
    DBusMessageIter value;
    DBusMessage *reply = cnm_get_property(m, path, interface, name, &value, error, size);
    if (!reply) return CNM_FAILED;
    int ok = cnm_d.dbus_message_iter_get_arg_type(&value) == T_UINT32;
    if (ok) cnm_d.dbus_message_iter_get_basic(&value, out);
    cnm_d.dbus_message_unref(reply);
    return ok ? 0 : cnm_fail(error, size, "NetworkManager answered a property of another type", NULL);
}

/// Calls `method` of `interface` on `path` with no arguments and hands each object path of its `ao` answer to
/// `each` (which returns nonzero to stop).
int cnm_each_path(cnm *m, const char *path, const char *interface, const char *method,
                  int (*each)(cnm *, const char *, void *), void *context, char *error, size_t size) {
    DBusMessage *reply =
        cnm_call(m, cnm_d.dbus_message_new_method_call(NM, path, interface, method), method, error, size);
    if (!reply) return CNM_FAILED;
    DBusMessageIter answer, paths;
    int result = 0;
    if (cnm_d.dbus_message_iter_init(reply, &answer) && cnm_d.dbus_message_iter_get_arg_type(&answer) == T_ARRAY) {
        cnm_d.dbus_message_iter_recurse(&answer, &paths);
        while (cnm_d.dbus_message_iter_get_arg_type(&paths) == T_OBJECT_PATH) {
            const char *object = NULL;
            cnm_d.dbus_message_iter_get_basic(&paths, &object);
            if ((result = each(m, object, context)) != 0) break;
            cnm_d.dbus_message_iter_next(&paths);
        }
    } else {
        result = cnm_fail(error, size, "NetworkManager answered something other than a list of objects", NULL);
    }
    cnm_d.dbus_message_unref(reply);
    return result < 0 ? result : 0;
}
