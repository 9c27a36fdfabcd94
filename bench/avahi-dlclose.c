// Whether libavahi-client and what it pulls in leave the process at dlclose, as CAvahi's release expects: on a
// thread that outlives it (the agent's avahi-lane), it dlopens libavahi-client.so.3, makes a threaded poll and a
// client (AVAHI_CLIENT_NO_FAIL: it connects to the system bus when there is one, DBUS_SYSTEM_BUS_ADDRESS too),
// runs Avahi's thread for 0.2 s, stops and frees them, dlcloses, and counts the shared libraries in
// /proc/self/maps before, while in use, after the dlclose and after the thread's end. With CYCLES it does that
// CYCLES times (a window opened and closed each time; 1 ms of Avahi's thread) and prints VmRSS after the first and
// the last, to show what a reload leaves behind; with `keep` it never dlcloses (one load, as before the unload).
// Not part of the device:
//   cc -O2 -o /tmp/avahi-dlclose bench/avahi-dlclose.c && /tmp/avahi-dlclose [CYCLES [keep]]
// (docs/benchmarks.md, "An unpaired start and the pairing window's libraries").
#include <avahi-client/client.h>
#include <avahi-common/error.h>
#include <avahi-common/thread-watch.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cycles = 1, keep, quiet;

static long rss_kb(void) {
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (status && fgets(line, sizeof line, status))
        if (!strncmp(line, "VmRSS:", 6)) kb = atol(line + 6);
    if (status) fclose(status);
    return kb;
}

static void count_libraries(const char *when) {
    if (quiet) return;
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[512], seen[64][256];
    int count = 0;
    while (maps && fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (!path || !strstr(path, ".so")) continue;
        path[strcspn(path, "\n")] = 0;
        int known = 0;
        for (int i = 0; i < count; i++) known |= !strcmp(seen[i], path);
        if (!known && count < 64) snprintf(seen[count++], sizeof seen[0], "%s", path);
    }
    if (maps) fclose(maps);
    printf("%s: %d shared libraries:", when, count);
    for (int i = 0; i < count; i++) printf(" %s", strrchr(seen[i], '/') + 1);
    printf("\n");
}

#define LOOK_UP(library, name) __typeof__(&name) p_##name = dlsym(library, #name)

static void *lane(void *unused) {
    (void)unused;
    void *library = dlopen("libavahi-client.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        printf("dlopen: %s\n", dlerror());
        return NULL;
    }
    LOOK_UP(library, avahi_threaded_poll_new);
    LOOK_UP(library, avahi_threaded_poll_get);
    LOOK_UP(library, avahi_threaded_poll_start);
    LOOK_UP(library, avahi_threaded_poll_stop);
    LOOK_UP(library, avahi_threaded_poll_free);
    LOOK_UP(library, avahi_client_new);
    LOOK_UP(library, avahi_client_free);
    LOOK_UP(library, avahi_strerror);
    AvahiThreadedPoll *poll = p_avahi_threaded_poll_new();
    int error = 0;
    AvahiClient *client = p_avahi_client_new(p_avahi_threaded_poll_get(poll), AVAHI_CLIENT_NO_FAIL, NULL, NULL, &error);
    if (!quiet) printf("client: %s\n", client ? "made (connected to a system bus)" : p_avahi_strerror(error));
    p_avahi_threaded_poll_start(poll);
    usleep(cycles > 1 ? 1000 : 200000);
    count_libraries("in use");
    p_avahi_threaded_poll_stop(poll);
    if (client) p_avahi_client_free(client);
    p_avahi_threaded_poll_free(poll);
    if (!keep && dlclose(library) != 0) printf("dlclose: %s\n", dlerror());
    count_libraries(keep ? "after the stop (kept loaded)" : "after dlclose, on the same thread");
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) cycles = atoi(argv[1]) > 0 ? atoi(argv[1]) : 1;
    keep = argc > 2 && !strcmp(argv[2], "keep");
    count_libraries("before");
    for (int cycle = 1; cycle <= cycles; cycle++) {
        pthread_t thread;
        pthread_create(&thread, NULL, lane, NULL);
        pthread_join(thread, NULL);
        count_libraries("after the thread's end");
        if (cycle == 1 || cycle == cycles) printf("VmRSS after cycle %d: %ld kB\n", cycle, rss_kb());
        quiet = 1;
    }
    return 0;
}
