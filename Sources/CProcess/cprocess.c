#include "cprocess.h"

#if defined(__GLIBC__)
#include <malloc.h>
int cprocess_limit_malloc_arenas(int count) { return mallopt(M_ARENA_MAX, count); }
#else
int cprocess_limit_malloc_arenas(int count) {
    (void)count;
    return 0;
}
#endif

#if defined(__linux__)
#include <sys/prctl.h>
int cprocess_set_dumpable(int dumpable) { return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL); }
int cprocess_get_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0UL, 0UL, 0UL, 0UL); }
int cprocess_set_thp_disable(int disable) {
    return prctl(PR_SET_THP_DISABLE, (unsigned long)disable, 0UL, 0UL, 0UL);
}
int cprocess_get_thp_disable(void) { return prctl(PR_GET_THP_DISABLE, 0UL, 0UL, 0UL, 0UL); }
int cprocess_set_thread_name(const char *name) { return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL); }
#else
#include <errno.h>
int cprocess_set_dumpable(int dumpable) {
    (void)dumpable;
    errno = ENOSYS;
    return -1;
}
int cprocess_get_dumpable(void) {
    errno = ENOSYS;
    return -1;
}
int cprocess_set_thp_disable(int disable) {
    (void)disable;
    errno = ENOSYS;
    return -1;
}
int cprocess_get_thp_disable(void) {
    errno = ENOSYS;
    return -1;
}
int cprocess_set_thread_name(const char *name) {
    (void)name;
    errno = ENOSYS;
    return -1;
}
#endif

// The Swift runtime's hook variables (libswift_Concurrency): each holds a function pointer or NULL.
extern void *swift_task_enqueueGlobal_hook;
extern void *swift_task_enqueueGlobalWithDelay_hook;
extern void *swift_task_enqueueGlobalWithDeadline_hook;

void **cprocess_enqueue_global_hook(void) { return &swift_task_enqueueGlobal_hook; }
void **cprocess_enqueue_global_with_delay_hook(void) { return &swift_task_enqueueGlobalWithDelay_hook; }
void **cprocess_enqueue_global_with_deadline_hook(void) { return &swift_task_enqueueGlobalWithDeadline_hook; }
