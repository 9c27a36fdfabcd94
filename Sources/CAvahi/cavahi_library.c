// The loading of libavahi-client and the count of its holders (cavahi_hold, cavahi_release), and Avahi's error texts.
// libavahi-client is loaded while a pairing window is open (or `check-config` asks), with dlopen, not linked, and
// unloaded with dlclose once the last holder lets it go (the window closed, its advertisement stopped and Avahi's
// thread joined): a device that is paired, whether at its start or during this run, maps none of it nor the D-Bus
// and systemd libraries it pulls in (nine shared libraries beside the agent's own: docs/benchmarks.md), and starts
// as fast as without it. None of them is marked NODELETE (`readelf -d`: FLAGS_1 is NOW only; bench/avahi-dlclose.c
// shows them leave), and libdbus-1 stays mapped while CNetworkManager holds it too (dlopen counts each holder).
// The package recommends it with avahi-daemon; without it the agent pairs as before and says the port is not
// advertised, and why.
#include "cavahi_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

struct cavahi_symbols cavahi_sym;

// The library and its holders (cavahi_hold; each advertisement holds it too, from cavahi_start to cavahi_stop). The
// pointers in `cavahi_sym` are read without the lock: only by a holder, and the library is not closed while one is.
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
    if (found && !(cavahi_sym.p_##name = (__typeof__(cavahi_sym.p_##name))dlsym(opened, #name)))                       \
        found = 0;
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
        memset(&cavahi_sym, 0, sizeof cavahi_sym);
        dlclose(library);
        library = NULL;
    }
    pthread_mutex_unlock(&load_lock);
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
