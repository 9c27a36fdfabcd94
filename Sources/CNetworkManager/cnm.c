// The connection to the bus that NetworkManager answers on, and its signals: cnm_open and cnm_close, the state of
// NetworkManager and of an active connection, and the wait for a signal (with the wake that ends it). The calls it
// makes are in cnm_message.c, libdbus-1's loading in cnm_library.c.
#include "cnm_internal.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int drain(cnm *m);

cnm *cnm_open(const char *address, char *error, size_t size) {
    if (!cnm_load()) {
        cnm_fail(error, size, "libdbus-1 is not installed (libdbus-1-3)", NULL);
        return NULL;
    }
    DBusError bus_error;
    cnm_d.dbus_error_init(&bus_error);
    DBusConnection *bus = address ? cnm_d.dbus_connection_open_private(address, &bus_error)
                                  : cnm_d.dbus_bus_get_private(DBUS_BUS_SYSTEM, &bus_error);
    if (!bus) {
        cnm_fail(error, size, "no system bus", &bus_error);
        return NULL;
    }
    if (address && !cnm_d.dbus_bus_register(bus, &bus_error)) {
        cnm_fail(error, size, "the bus refused this connection", &bus_error);
        cnm_d.dbus_connection_close(bus);
        cnm_d.dbus_connection_unref(bus);
        return NULL;
    }
    cnm_d.dbus_connection_set_exit_on_disconnect(bus, 0);
    cnm *m = calloc(1, sizeof *m);
    if (!m) {
        cnm_d.dbus_connection_close(bus);
        cnm_d.dbus_connection_unref(bus);
        cnm_fail(error, size, "out of memory", NULL);
        return NULL;
    }
    m->bus = bus;
    m->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (m->wake < 0) {
        cnm_fail(error, size, "no eventfd", NULL);
        cnm_close(m);
        return NULL;
    }
    uint32_t state = 0;
    if (cnm_get_u32(m, NM_PATH, NM, "State", &state, error, size) != 0) {
        cnm_close(m);
        return NULL;
    }
    const char *rules[] = {
        "type='signal',sender='org.freedesktop.NetworkManager'",
        "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='org.freedesktop.NetworkManager'",
    };
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
        cnm_d.dbus_error_init(&bus_error);
        cnm_d.dbus_bus_add_match(bus, rules[i], &bus_error);
        if (cnm_d.dbus_error_is_set(&bus_error)) {
            cnm_fail(error, size, "could not subscribe to NetworkManager's signals", &bus_error);
            cnm_close(m);
            return NULL;
        }
    }
    return m;
}

void cnm_close(cnm *m) {
    if (!m) return;
    if (m->wake > 0) close(m->wake);
    cnm_d.dbus_connection_close(m->bus);
    cnm_d.dbus_connection_unref(m->bus);
    free(m);
}

int cnm_state(cnm *m, uint32_t *state, uint32_t *connectivity, char *error, size_t size) {
    if (cnm_get_u32(m, NM_PATH, NM, "State", state, error, size) != 0) return CNM_FAILED;
    return cnm_get_u32(m, NM_PATH, NM, "Connectivity", connectivity, error, size);
}

int cnm_active_state(cnm *m, const char *active, const char *device, uint32_t *state, uint32_t *reason, char *error,
                     size_t size) {
    *reason = 0;
    if (cnm_get_u32(m, active, "org.freedesktop.NetworkManager.Connection.Active", "State", state, error, size) != 0) {
        if (!strstr(error, "UnknownObject") && !strstr(error, "UnknownMethod")) return CNM_FAILED;
        *state = 4;
    }
    // The device's StateChanged signal came before the answer just read (the bus keeps their order): taken from
    // the queue now, so a join that ended is read with its reason.
    if (*state >= 3) {
        cnm_d.dbus_connection_read_write(m->bus, 0);
        drain(m);
    }
    if (*state >= 3 && m->failed_reason && strcmp(m->failed_device, device) == 0) {
        *reason = m->failed_reason;
        return 0;
    }
    DBusMessageIter value;
    char ignored[256];
    DBusMessage *reply = cnm_get_property(m, device, "org.freedesktop.NetworkManager.Device", "StateReason", &value,
                                          ignored, sizeof ignored);
    if (reply) {
        if (cnm_d.dbus_message_iter_get_arg_type(&value) == T_STRUCT) {
            DBusMessageIter fields;
            cnm_d.dbus_message_iter_recurse(&value, &fields);
            cnm_d.dbus_message_iter_next(&fields);
            if (cnm_d.dbus_message_iter_get_arg_type(&fields) == T_UINT32)
                cnm_d.dbus_message_iter_get_basic(&fields, reason);
        }
        cnm_d.dbus_message_unref(reply);
    }
    return 0;
}

// Pops every message the connection has queued; records a device's failure reason (StateChanged to 120); 1 when
// any of them was a signal.
static int drain(cnm *m) {
    int signalled = 0;
    DBusMessage *message;
    while ((message = cnm_d.dbus_connection_pop_message(m->bus))) {
        if (cnm_d.dbus_message_get_type(message) == DBUS_MESSAGE_TYPE_SIGNAL) signalled = 1;
        DBusMessageIter arguments;
        uint32_t states[3] = {0, 0, 0};  // new, old, reason
        if (cnm_d.dbus_message_is_signal(message, "org.freedesktop.NetworkManager.Device", "StateChanged") &&
            cnm_d.dbus_message_iter_init(message, &arguments)) {
            for (int i = 0; i < 3 && cnm_d.dbus_message_iter_get_arg_type(&arguments) == T_UINT32; i++) {
                cnm_d.dbus_message_iter_get_basic(&arguments, &states[i]);
                cnm_d.dbus_message_iter_next(&arguments);
            }
            const char *path = cnm_d.dbus_message_get_path(message);
            if (states[0] == 120 && path) {
                m->failed_reason = states[2];
                snprintf(m->failed_device, sizeof m->failed_device, "%s", path);
            }
        }
        cnm_d.dbus_message_unref(message);
    }
    return signalled;
}

int cnm_wait(cnm *m, int timeout_ms) {
    // What has arrived already (a signal read during a call sits in the queue) is taken first.
    if (!cnm_d.dbus_connection_read_write(m->bus, 0)) return CNM_FAILED;
    if (drain(m)) return 1;
    int fd = -1;
    if (!cnm_d.dbus_connection_get_unix_fd(m->bus, &fd)) return CNM_FAILED;
    struct pollfd fds[2] = {{.fd = fd, .events = POLLIN}, {.fd = m->wake, .events = POLLIN}};
    if (poll(fds, 2, timeout_ms) > 0 && (fds[1].revents & POLLIN)) {
        uint64_t count;
        (void)!read(m->wake, &count, sizeof count);
    }
    if (!cnm_d.dbus_connection_read_write(m->bus, 0)) return CNM_FAILED;
    return drain(m);
}

void cnm_wake(cnm *m) {
    uint64_t one = 1;
    (void)!write(m->wake, &one, sizeof one);
}
