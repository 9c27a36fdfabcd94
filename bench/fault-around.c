// How much of a file mapping one page fault makes resident (scripts/footprint-steps.sh): maps FILE the way the
// loader maps text (private, read and execute), gives it ADVICE (normal or random: madvise(MADV_RANDOM)), reads
// one byte every MiB and prints the growth of the process's resident set per fault. The kernel maps the pages
// around a faulting one that are already in the page cache ("fault-around", /sys/kernel/mm/…/fault_around_bytes
// where debugfs shows it); this shows whether MADV_RANDOM stops that on the running kernel.
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

static long resident_kib(void) {
    long pages = 0, resident = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (statm == NULL || fscanf(statm, "%ld %ld", &pages, &resident) != 2) {
        perror("/proc/self/statm");
        return -1;
    }
    fclose(statm);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[2], "normal") != 0 && strcmp(argv[2], "random") != 0)) {
        fprintf(stderr, "usage: fault-around FILE normal|random\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    off_t size = fd < 0 ? -1 : lseek(fd, 0, SEEK_END);
    if (size <= 0) {
        perror(argv[1]);
        return 1;
    }
    const volatile char *text = mmap(NULL, (size_t)size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    if (text == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    if (strcmp(argv[2], "random") == 0 && madvise((void *)text, (size_t)size, MADV_RANDOM) != 0) {
        perror("madvise");
        return 1;
    }
    long before = resident_kib();
    long faults = 0;
    for (off_t at = 0; at < size; at += 1 << 20, faults++) (void)text[at];
    long grown = resident_kib() - before;
    struct utsname host;
    uname(&host);
    printf("fault-around, advice %s: %ld faults made %ld KiB resident, %ld KiB a fault (kernel %s, %s)\n", argv[2],
           faults, grown, grown / faults, host.release, host.machine);
    return 0;
}
