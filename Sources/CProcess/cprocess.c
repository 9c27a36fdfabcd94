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

// The Swift runtime's hook variables (libswift_Concurrency): each holds a function pointer or NULL.
extern void *swift_task_enqueueGlobal_hook;
extern void *swift_task_enqueueGlobalWithDelay_hook;
extern void *swift_task_enqueueGlobalWithDeadline_hook;

void **cprocess_enqueue_global_hook(void) { return &swift_task_enqueueGlobal_hook; }
void **cprocess_enqueue_global_with_delay_hook(void) { return &swift_task_enqueueGlobalWithDelay_hook; }
void **cprocess_enqueue_global_with_deadline_hook(void) { return &swift_task_enqueueGlobalWithDeadline_hook; }
