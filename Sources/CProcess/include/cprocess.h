#ifndef CPROCESS_H
#define CPROCESS_H
// Process-wide settings that the C library's and the Swift runtime's Swift faces do not offer, called from
// Sources/ReplenishAgent/System only:
// - glibc's malloc tuning (mallopt; <malloc.h> is not in the C library's Swift module);
// - the process's dumpable and transparent-huge-page flags (prctl is variadic, which Swift cannot call);
// - the addresses of the Swift runtime's global-executor hooks (swift_task_enqueueGlobal_hook and the two for
//   delayed jobs). SwiftNIO finds the first with dlsym, which fails in a binary with the Swift runtime linked
//   statically (its symbols are not exported); naming them here lets the linker resolve them in both builds.

/// Caps the number of malloc arenas (glibc's M_ARENA_MAX); returns 1 when set, 0 when not (another C library).
int cprocess_limit_malloc_arenas(int count);

/// prctl(PR_SET_DUMPABLE, dumpable): 0 on success, -1 with errno set (or where there is no prctl).
int cprocess_set_dumpable(int dumpable);
/// prctl(PR_GET_DUMPABLE): 1 when dumpable, 0 when not (2: dumpable by root only), -1 with errno set.
int cprocess_get_dumpable(void);
/// prctl(PR_SET_THP_DISABLE, disable): 0 on success, -1 with errno set (or where there is no prctl).
int cprocess_set_thp_disable(int disable);
/// prctl(PR_SET_NAME, name): names the calling thread (15 characters kept); 0 on success, -1 with errno set.
int cprocess_set_thread_name(const char *name);
/// prctl(PR_GET_THP_DISABLE): 1 when transparent huge pages are off for the process, 0 when not, -1 on error.
int cprocess_get_thp_disable(void);

/// The address of `swift_task_enqueueGlobal_hook` (a function pointer, NULL until set).
void **cprocess_enqueue_global_hook(void);
/// The address of `swift_task_enqueueGlobalWithDelay_hook`.
void **cprocess_enqueue_global_with_delay_hook(void);
/// The address of `swift_task_enqueueGlobalWithDeadline_hook`.
void **cprocess_enqueue_global_with_deadline_hook(void);

/// Installs the crash report (crashreport.c): on SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE or SIGABRT, one line on
/// stderr with the signal, the faulting address and the return addresses as offsets into the binary, and `label`
/// (the build); then the signal's default action. 0 when installed, -1 when not (another CPU or system).
int cprocess_install_crash_report(const char *label);

#endif
