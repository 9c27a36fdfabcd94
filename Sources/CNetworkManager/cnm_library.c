// The loading of libdbus-1 (its types and the functions looked up are in cnm_internal.h). libdbus-1 is loaded when
// setup mode is first needed, with dlopen, not linked (like libavahi-client in CAvahi): a unit on its network never
// maps it. Unlike CAvahi's, it is never unloaded: a setup mode that woke follows NetworkManager until the agent stops
// (an outage opens the access point again, docs/wifi-setup.md), so its connection and the library are in use for the
// rest of the run.
#include "cnm_internal.h"

#include <dlfcn.h>
#include <pthread.h>

struct cnm_libdbus cnm_d;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int loaded;

static void load(void) {
    void *library = dlopen("libdbus-1.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!library) return;
#define CNM_LOOKUP(name, result, arguments)                                                                            \
    if (!(cnm_d.name = (result(*) arguments)dlsym(library, #name))) return;
    CNM_SYMBOLS(CNM_LOOKUP)
#undef CNM_LOOKUP
    loaded = 1;
}

int cnm_load(void) {
    pthread_once(&load_once, load);
    return loaded;
}
