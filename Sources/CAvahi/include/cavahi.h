// The agent's DNS-SD advertisement through avahi-daemon (libavahi-client), as one small object whose state
// machine runs on Avahi's own thread (avahi_threaded_poll): Avahi's callbacks must create, reset and free its
// objects from inside themselves (a daemon restart frees the client and makes a new one in its callback, as
// avahi-publish does), which Swift closures passed as C function pointers cannot do without capturing state.
// Swift sees only: start one advertisement, learn its state through a callback, stop it.
#ifndef CAVAHI_H
#define CAVAHI_H

#include <stdint.h>

/// What the advertisement is doing, reported to the callback from Avahi's thread.
typedef enum {
    /// The daemon answered and the service is established on the network.
    CAVAHI_ADVERTISED = 0,
    /// No avahi-daemon (or no system bus): waiting for one to appear (AVAHI_CLIENT_NO_FAIL).
    CAVAHI_WAITING_FOR_DAEMON = 1,
    /// The daemon refused the service (`error` says why: avahi_strerror).
    CAVAHI_FAILED = 2,
    /// Registering with the daemon (not yet on the network).
    CAVAHI_REGISTERING = 3,
    /// The system bus went away (`error`: CAVAHI_NO_BUS, or why no new client could be made): this advertisement
    /// has no client any more and never makes one. Stop it and start another once a bus may answer.
    CAVAHI_ENDED = 4,
} cavahi_state;

/// The error of `cavahi_hold`, `cavahi_start` and `cavahi_probe` when libavahi-client cannot be loaded (it is loaded
/// with dlopen while held, not linked: see cavahi_library.c).
#define CAVAHI_NOT_INSTALLED (-10000)

/// The error of `cavahi_start` (and of CAVAHI_ENDED) when no system bus answers: libdbus found no socket, or
/// no one listening on it. Avahi itself calls the first "Daemon not running".
#define CAVAHI_NO_BUS (-10001)

/// `host_name`: with CAVAHI_ADVERTISED, the host name the daemon publishes the service under (its FQDN, such as
/// `name-2.local` after a conflict), valid only during the call; NULL otherwise.
typedef void (*cavahi_callback)(cavahi_state state, int error, const char *host_name, void *userdata);

typedef struct cavahi_advertisement cavahi_advertisement;

/// Holds libavahi-client loaded (dlopen at the first hold): 0, or CAVAHI_NOT_INSTALLED (nothing held). Every hold
/// ends with one `cavahi_release`; an advertisement holds it too, from `cavahi_start` until `cavahi_stop` returns.
int cavahi_hold(void);

/// Ends one hold; the last one unloads libavahi-client and the libraries it pulled in (dlclose).
void cavahi_release(void);

/// Starts advertising `name` of `type` on `port` with the TXT strings in `txt_lines`, one a line (copied). Returns
/// NULL with `*error` set when Avahi's thread or client cannot be made at all (out of memory); a missing daemon
/// is not an error (the advertisement waits for it). The callback runs on Avahi's thread.
cavahi_advertisement *cavahi_start(const char *name, const char *type, uint16_t port, const char *txt_lines,
                                   cavahi_callback callback, void *userdata, int *error);

/// Stops Avahi's thread, closes the client's connection to the system bus, which withdraws the service (the
/// daemon sends its goodbye once the bus tells it), and frees everything; it never waits for avahi-daemon. It
/// waits for Avahi's thread, which waits for the daemon only while a callback of its own calls it (a publish).
/// The callback is not called any more once this returns.
void cavahi_stop(cavahi_advertisement *advertisement);

/// Avahi's text for an error code (Avahi's own while the library is held, a generic one otherwise).
const char *cavahi_strerror(int error);

/// Whether an avahi-daemon answers on the system bus now (0), or the error code why not (check-config).
int cavahi_probe(void);

#endif
