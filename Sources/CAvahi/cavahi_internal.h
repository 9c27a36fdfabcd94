// What the files of CAvahi share, and Swift does not see (it imports include/cavahi.h only): Avahi's headers, the
// functions looked up in libavahi-client (cavahi_library.c loads it and keeps the count of its holders), and the
// macros that send every Avahi call of cavahi.c through them.
#ifndef CAVAHI_INTERNAL_H
#define CAVAHI_INTERNAL_H

#include "cavahi.h"

#include <avahi-client/client.h>
#include <avahi-client/publish.h>
#include <avahi-common/alternative.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/simple-watch.h>
#include <avahi-common/strlst.h>
#include <avahi-common/thread-watch.h>

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

/// The functions of CAVAHI_SYMBOLS, found by cavahi_hold (its pointer to `name` is `cavahi_sym.p_name`).
struct cavahi_symbols {
#define CAVAHI_POINTER(name) __typeof__(&name) p_##name;
    CAVAHI_SYMBOLS(CAVAHI_POINTER)
#undef CAVAHI_POINTER
};
extern struct cavahi_symbols cavahi_sym;

// From here on (in every file that includes this header) every Avahi call goes through the looked-up pointers.
#define CAVAHI_CALL(name) (*cavahi_sym.p_##name)
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

#endif
