// The advertisement: one service published through avahi-daemon, its state machine on Avahi's own thread (see
// include/cavahi.h), from cavahi_start to cavahi_stop; and cavahi_probe, which asks whether a daemon answers. Each
// holds libavahi-client while it runs (cavahi_library.c).
#include "cavahi_internal.h"

#include <stdlib.h>
#include <string.h>

struct cavahi_advertisement {
    AvahiThreadedPoll *poll;
    AvahiClient *client;
    AvahiEntryGroup *group;
    char *name;
    char *type;
    uint16_t port;
    AvahiStringList *txt;
    cavahi_callback callback;
    void *userdata;
};

static void client_callback(AvahiClient *client, AvahiClientState state, void *userdata);

static void report_host(cavahi_advertisement *a, cavahi_state state, int error, const char *host_name) {
    if (a->callback) a->callback(state, error, host_name, a->userdata);
}

static void report(cavahi_advertisement *a, cavahi_state state, int error) { report_host(a, state, error, NULL); }

static void group_callback(AvahiEntryGroup *group, AvahiEntryGroupState state, void *userdata);

/// Adds the service to a new or reset group and commits it. Runs on Avahi's thread (or before it starts).
static void publish(cavahi_advertisement *a, AvahiClient *client) {
    if (!a->group) {
        a->group = avahi_entry_group_new(client, group_callback, a);
        if (!a->group) {
            report(a, CAVAHI_FAILED, avahi_client_errno(client));
            return;
        }
    }
    int result = avahi_entry_group_add_service_strlst(a->group, AVAHI_IF_UNSPEC, AVAHI_PROTO_UNSPEC, 0, a->name,
                                                      a->type, NULL, NULL, a->port, a->txt);
    if (result == AVAHI_ERR_COLLISION) {
        char *next = avahi_alternative_service_name(a->name);
        avahi_free(a->name);
        a->name = next;
        avahi_entry_group_reset(a->group);
        publish(a, client);
        return;
    }
    if (result < 0 || (result = avahi_entry_group_commit(a->group)) < 0) {
        report(a, CAVAHI_FAILED, result);
        return;
    }
    report(a, CAVAHI_REGISTERING, 0);
}

static void group_callback(AvahiEntryGroup *group, AvahiEntryGroupState state, void *userdata) {
    cavahi_advertisement *a = userdata;
    switch (state) {
    case AVAHI_ENTRY_GROUP_ESTABLISHED:
        // The host name the daemon publishes now: the system's, or another after a conflict ("name-2.local"),
        // which the phone's requests then name in their Host.
        report_host(a, CAVAHI_ADVERTISED, 0, avahi_client_get_host_name_fqdn(avahi_entry_group_get_client(group)));
        break;
    case AVAHI_ENTRY_GROUP_COLLISION: {
        // Another host on the network has this name: take the next one ("name #2").
        char *next = avahi_alternative_service_name(a->name);
        avahi_free(a->name);
        a->name = next;
        avahi_entry_group_reset(group);
        publish(a, avahi_entry_group_get_client(group));
        break;
    }
    case AVAHI_ENTRY_GROUP_FAILURE:
        report(a, CAVAHI_FAILED, avahi_client_errno(avahi_entry_group_get_client(group)));
        break;
    default:
        break;
    }
}

/// The error of an avahi_client_new with AVAHI_CLIENT_NO_FAIL that returned no client. With that flag a missing
/// daemon makes a waiting client, not an error: what is left is the system bus, which Avahi reports as "Daemon
/// not running" (libdbus's FileNotFound: no socket) or a D-Bus error (no one listens on it).
static int no_bus(int error) {
    return error == AVAHI_ERR_NO_DAEMON || error == AVAHI_ERR_DBUS_ERROR ? CAVAHI_NO_BUS : error;
}

static void client_callback(AvahiClient *client, AvahiClientState state, void *userdata) {
    cavahi_advertisement *a = userdata;
    switch (state) {
    case AVAHI_CLIENT_S_RUNNING:
        // The daemon is up (at the start, once it appeared, or after it restarted): publish anew.
        if (a->group) avahi_entry_group_reset(a->group);
        publish(a, client);
        break;
    case AVAHI_CLIENT_S_COLLISION:
    case AVAHI_CLIENT_S_REGISTERING:
        // The host name is being (re)registered: the service comes back once the daemon runs again.
        if (a->group) avahi_entry_group_reset(a->group);
        report(a, CAVAHI_REGISTERING, 0);
        break;
    case AVAHI_CLIENT_CONNECTING:
        report(a, CAVAHI_WAITING_FOR_DAEMON, AVAHI_ERR_NO_DAEMON);
        break;
    case AVAHI_CLIENT_FAILURE: {
        int error = avahi_client_errno(client);
        if (error == AVAHI_ERR_DISCONNECTED) {
            // The daemon or the system bus went away: free the client (and its group) and wait for the daemon
            // anew, as Avahi's docs say. A new client needs the bus: when it is gone too, this advertisement has
            // no client any more and never gets one; the owner stops it and starts another later.
            a->group = NULL;
            avahi_client_free(client);
            a->client = NULL;
            int failure = 0;
            a->client = avahi_client_new(avahi_threaded_poll_get(a->poll), AVAHI_CLIENT_NO_FAIL, client_callback,
                                         a, &failure);
            if (!a->client) report(a, CAVAHI_ENDED, no_bus(failure));
        } else {
            report(a, CAVAHI_FAILED, error);
        }
        break;
    }
    }
}

/// The TXT strings of `lines` (one a line, in order).
static AvahiStringList *txt_from_lines(const char *lines) {
    AvahiStringList *list = NULL;
    const char *start = lines;
    while (*start) {
        const char *end = strchr(start, '\n');
        size_t length = end ? (size_t)(end - start) : strlen(start);
        if (length > 0) list = avahi_string_list_add_arbitrary(list, (const uint8_t *)start, length);
        if (!end) break;
        start = end + 1;
    }
    // avahi_string_list_add prepends: the daemon sends the strings in list order, so put them back in order.
    return avahi_string_list_reverse(list);
}

cavahi_advertisement *cavahi_start(const char *name, const char *type, uint16_t port, const char *txt_lines,
                                   cavahi_callback callback, void *userdata, int *error) {
    if (cavahi_hold() != 0) {
        *error = CAVAHI_NOT_INSTALLED;
        return NULL;
    }
    cavahi_advertisement *a = calloc(1, sizeof *a);
    if (!a) {
        *error = AVAHI_ERR_NO_MEMORY;
        cavahi_release();
        return NULL;
    }
    a->name = avahi_strdup(name);
    a->type = avahi_strdup(type);
    a->port = port;
    a->txt = txt_from_lines(txt_lines);
    a->callback = callback;
    a->userdata = userdata;
    a->poll = avahi_threaded_poll_new();
    if (!a->name || !a->type || !a->poll) {
        *error = AVAHI_ERR_NO_MEMORY;
        cavahi_stop(a);
        return NULL;
    }
    // The client is made before the thread starts, so its first callbacks run here, without the lock.
    a->client = avahi_client_new(avahi_threaded_poll_get(a->poll), AVAHI_CLIENT_NO_FAIL, client_callback, a, error);
    if (!a->client || avahi_threaded_poll_start(a->poll) < 0) {
        *error = a->client ? AVAHI_ERR_FAILURE : no_bus(*error);
        cavahi_stop(a);
        return NULL;
    }
    return a;
}

void cavahi_stop(cavahi_advertisement *a) {
    if (!a) return;
    if (a->poll) avahi_threaded_poll_stop(a->poll);
    a->callback = NULL;
    // avahi_client_free closes the client's D-Bus connection first, and then frees the group without a call (a
    // closed connection makes none): the bus tells avahi-daemon the client is gone, and the daemon frees its
    // groups, which withdraws the service (its goodbye packets at once). Nothing here waits for the daemon's
    // answer: avahi_entry_group_free first would wait for it, up to libdbus's 25 s when the daemon hangs.
    if (a->client) avahi_client_free(a->client);
    if (a->poll) avahi_threaded_poll_free(a->poll);
    avahi_string_list_free(a->txt);
    avahi_free(a->name);
    avahi_free(a->type);
    free(a);
    // Avahi's thread has been joined and nothing of the advertisement is left: its hold on the library ends.
    cavahi_release();
}

int cavahi_probe(void) {
    if (cavahi_hold() != 0) return CAVAHI_NOT_INSTALLED;
    AvahiSimplePoll *poll = avahi_simple_poll_new();
    int error = AVAHI_ERR_NO_MEMORY;
    AvahiClient *client = poll ? avahi_client_new(avahi_simple_poll_get(poll), 0, NULL, NULL, &error) : NULL;
    if (client) avahi_client_free(client);
    if (poll) avahi_simple_poll_free(poll);
    cavahi_release();
    return client ? 0 : error;
}
