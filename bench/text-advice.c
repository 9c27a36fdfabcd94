// A variant of scripts/footprint-steps.sh: loaded into the agent with LD_PRELOAD, it gives the agent's own text
// mapping madvise(MADV_RANDOM) before main runs, so every fault of the agent's code (start-up included) comes
// under the advice. The step is measured this way and not built in: on the kernels measured the advice does not
// change what a fault maps (bench/fault-around.c).
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

static int advise_main_program(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    // The first object dl_iterate_phdr reports is the main program.
    long page = sysconf(_SC_PAGESIZE);
    for (int index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type != PT_LOAD || !(header->p_flags & PF_X)) continue;
        uintptr_t start = (info->dlpi_addr + header->p_vaddr) & ~(uintptr_t)(page - 1);
        uintptr_t end = info->dlpi_addr + header->p_vaddr + header->p_memsz;
        if (madvise((void *)start, end - start, MADV_RANDOM) != 0) perror("text-advice: madvise");
    }
    return 1;
}

__attribute__((constructor)) static void advise(void) { dl_iterate_phdr(advise_main_program, NULL); }
