#include "cavahi.h"

#include <avahi-client/client.h>
#include <avahi-client/publish.h>
#include <avahi-common/alternative.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/simple-watch.h>
#include <avahi-common/strlst.h>
#include <avahi-common/thread-watch.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// libavahi-client is loaded while a pairing window is open (or `check-config` asks), with dlopen, not linked, and
// unloaded with dlclose once the last holder lets it go (the window closed, its advertisement stopped and Avahi's
// thread joined): a device that is paired, whether at its start or during this run, maps none of it nor the D-Bus
// and systemd libraries it pulls in (nine shared libraries beside the agent's own: docs/benchmarks.md), and starts
// as fast as without it. None of them is marked NODELETE (`readelf -d`: FLAGS_1 is NOW only; bench/avahi-dlclose.c
// shows them leave), and libdbus-1 stays mapped while CNetworkManager holds it too (dlopen counts each holder).
// The package recommends it with avahi-daemon; without it the agent pairs as before and says the port is not
// advertised, and why.
#define CAVAHI_SYMBOLS(X)                                                                                              \
    X(avahi_client_new)                                                                                                \
    X(avahi_client_free)                                                                                               \
    X(avahi_client_errno)                                                                                              \
    X(avahi_client_get_host_name_fqdn)                                                                                 \
    X(avahi_entry_group_new)                                                                                           \
    X(avahi_entry_group_reset)                                                                                         \
    X(avahi_entry_group_commit)                                                                                        \
    X(avahi_entry_group_get_client)                                                                                    \
    X(avahi_entry_group_add_service_strlst)                                                                            \
    X(avahi_alternative_service_name)                                                                                  \
    X(avahi_strerror)                                                                                                  \
    X(avahi_free)                                                                                                      \
    X(avahi_strdup)                                                                                                    \
    X(avahi_string_list_add_arbitrary)                                                                                 \
    X(avahi_string_list_reverse)                                                                                       \
    X(avahi_string_list_free)                                                                                          \
    X(avahi_threaded_poll_new)                                                                                         \
    X(avahi_threaded_poll_get)                                                                                         \
    X(avahi_threaded_poll_start)                                                                                       \
    X(avahi_threaded_poll_stop)                                                                                        \
    X(avahi_threaded_poll_free)                                                                                        \
    X(avahi_simple_poll_new)                                                                                           \
    X(avahi_simple_poll_get)                                                                                           \
    X(avahi_simple_poll_free)

static struct {
#define CAVAHI_POINTER(name) __typeof__(&name) p_##name;
    CAVAHI_SYMBOLS(CAVAHI_POINTER)
#undef CAVAHI_POINTER
} sym;

// The library and its holders (cavahi_hold; each advertisement holds it too, from cavahi_start to cavahi_stop).
// The pointers in `sym` are read without the lock: only by a holder, and the library is not closed while one is.
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static void *library;
static unsigned holders;

int cavahi_hold(void) {
    pthread_mutex_lock(&load_lock);
    if (!library) {
        // libavahi-client's dependencies hold the avahi-common functions, found by dlsym through it; every
        // function is looked up, or none is used.
        void *opened = dlopen("libavahi-client.so.3", RTLD_NOW | RTLD_LOCAL);
        int found = opened != NULL;
#define CAVAHI_LOOKUP(name)                                                                                            \
    if (found && !(sym.p_##name = (__typeof__(sym.p_##name))dlsym(opened, #name))) found = 0;
        CAVAHI_SYMBOLS(CAVAHI_LOOKUP)
#undef CAVAHI_LOOKUP
        if (found) library = opened;
        else if (opened) dlclose(opened);
    }
    int result = library ? 0 : CAVAHI_NOT_INSTALLED;
    if (library) holders++;
    pthread_mutex_unlock(&load_lock);
    return result;
}

void cavahi_release(void) {
    pthread_mutex_lock(&load_lock);
    if (holders > 0 && --holders == 0 && library) {
        memset(&sym, 0, sizeof sym);
        dlclose(library);
        library = NULL;
    }
    pthread_mutex_unlock(&load_lock);
}

// From here on every Avahi call goes through the looked-up pointers.
#define CAVAHI_CALL(name) (*sym.p_##name)
#define avahi_client_new CAVAHI_CALL(avahi_client_new)
#define avahi_client_free CAVAHI_CALL(avahi_client_free)
#define avahi_client_errno CAVAHI_CALL(avahi_client_errno)
#define avahi_client_get_host_name_fqdn CAVAHI_CALL(avahi_client_get_host_name_fqdn)
#define avahi_entry_group_new CAVAHI_CALL(avahi_entry_group_new)
#define avahi_entry_group_reset CAVAHI_CALL(avahi_entry_group_reset)
#define avahi_entry_group_commit CAVAHI_CALL(avahi_entry_group_commit)
#define avahi_entry_group_get_client CAVAHI_CALL(avahi_entry_group_get_client)
#define avahi_entry_group_add_service_strlst CAVAHI_CALL(avahi_entry_group_add_service_strlst)
#define avahi_alternative_service_name CAVAHI_CALL(avahi_alternative_service_name)
#define avahi_strerror CAVAHI_CALL(avahi_strerror)
#define avahi_free CAVAHI_CALL(avahi_free)
#define avahi_strdup CAVAHI_CALL(avahi_strdup)
#define avahi_string_list_add_arbitrary CAVAHI_CALL(avahi_string_list_add_arbitrary)
#define avahi_string_list_reverse CAVAHI_CALL(avahi_string_list_reverse)
#define avahi_string_list_free CAVAHI_CALL(avahi_string_list_free)
#define avahi_threaded_poll_new CAVAHI_CALL(avahi_threaded_poll_new)
#define avahi_threaded_poll_get CAVAHI_CALL(avahi_threaded_poll_get)
#define avahi_threaded_poll_start CAVAHI_CALL(avahi_threaded_poll_start)
#define avahi_threaded_poll_stop CAVAHI_CALL(avahi_threaded_poll_stop)
#define avahi_threaded_poll_free CAVAHI_CALL(avahi_threaded_poll_free)
#define avahi_simple_poll_new CAVAHI_CALL(avahi_simple_poll_new)
#define avahi_simple_poll_get CAVAHI_CALL(avahi_simple_poll_get)
#define avahi_simple_poll_free CAVAHI_CALL(avahi_simple_poll_free)

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

const char *cavahi_strerror(int error) {
    if (error == CAVAHI_NOT_INSTALLED) return "libavahi-client3 is not installed (apt-get install libavahi-client3)";
    if (error == CAVAHI_NO_BUS) return "no system bus (dbus-daemon) answers";
    // Avahi's own texts while a holder keeps the library loaded (every caller does: Avahi's thread, a start).
    pthread_mutex_lock(&load_lock);
    const char *text = library ? avahi_strerror(error) : "an Avahi error";
    pthread_mutex_unlock(&load_lock);
    return text;
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
