// The one line a crash leaves in the journal (cprocess_install_crash_report). The agent writes no core file (it
// would hold the tokens), the Swift runtime of a release build prints nothing on a trap, and the device binary
// has no unwind tables: this handler prints the signal, where it happened and the return addresses found through
// the frame pointers, as offsets into the binary that `addr2line -f -e` on the maker's unstripped copy turns into
// functions (docs/behaviour.md, "When the agent crashes"). Only async-signal-safe calls: write, read, raise.
#define _GNU_SOURCE
#include "cprocess.h"

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

// The executable's ELF header, the end of its code and the end of its last segment: the linker defines them
// (lld and GNU ld).
extern const char __ehdr_start;
extern const char etext;
extern const char _end;

static char crash_label[128];
static int probe[2] = {-1, -1};  // a pipe: a write from an unmapped address fails with EFAULT instead of a fault

enum { frames_max = 16, scan_words = 2048 };

static size_t put(char *line, size_t at, size_t size, const char *text) {
    size_t length = strlen(text);
    if (at + length >= size) length = at < size - 1 ? size - 1 - at : 0;
    memcpy(line + at, text, length);
    return at + length;
}

static size_t put_hex(char *line, size_t at, size_t size, uintptr_t value) {
    char digits[2 + 2 * sizeof value + 1];
    size_t count = 0;
    do {
        digits[sizeof digits - 2 - count++] = "0123456789abcdef"[value & 0xf];
        value >>= 4;
    } while (value != 0);
    digits[sizeof digits - 2 - count++] = 'x';
    digits[sizeof digits - 2 - count++] = '0';
    digits[sizeof digits - 1] = '\0';
    return put(line, at, size, digits + sizeof digits - 1 - count);
}

static size_t put_decimal(char *line, size_t at, size_t size, unsigned value) {
    char digits[12];
    size_t count = 0;
    do {
        digits[sizeof digits - 2 - count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    digits[sizeof digits - 1] = '\0';
    return put(line, at, size, digits + sizeof digits - 1 - count);
}

// An address as `replenish-agent+0x…` inside the binary, or as it is (a shared library, the vDSO).
static size_t put_address(char *line, size_t at, size_t size, uintptr_t address) {
    uintptr_t start = (uintptr_t)&__ehdr_start, end = (uintptr_t)&_end;
    if (address >= start && address < end) {
        at = put(line, at, size, "replenish-agent+");
        return put_hex(line, at, size, address - start);
    }
    return put_hex(line, at, size, address);
}

// Two words at `address` (the saved frame pointer and the return address), read through the probe pipe.
static int read_words(uintptr_t address, uintptr_t words[2]) {
    if (probe[1] < 0 || address % sizeof(uintptr_t) != 0) return 0;
    if (write(probe[1], (const void *)address, 2 * sizeof(uintptr_t)) != (ssize_t)(2 * sizeof(uintptr_t))) return 0;
    return read(probe[0], words, 2 * sizeof(uintptr_t)) == (ssize_t)(2 * sizeof(uintptr_t));
}

static int in_code(uintptr_t address) {
    return address >= (uintptr_t)&__ehdr_start && address < (uintptr_t)&etext;
}

static const char *signal_name(int number) {
    switch (number) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
    }
}

static void report(int number, siginfo_t *info, void *context) {
    const ucontext_t *state = context;
#if defined(__x86_64__)
    uintptr_t pc = (uintptr_t)state->uc_mcontext.gregs[REG_RIP];
    uintptr_t frame = (uintptr_t)state->uc_mcontext.gregs[REG_RBP];
    uintptr_t stack = (uintptr_t)state->uc_mcontext.gregs[REG_RSP];
#else
    uintptr_t pc = (uintptr_t)state->uc_mcontext.pc;
    uintptr_t frame = (uintptr_t)state->uc_mcontext.regs[29];
    uintptr_t stack = (uintptr_t)state->uc_mcontext.sp;
#endif
    char line[2048];
    size_t at = put(line, 0, sizeof line, "replenish-agent: crashed: ");
    at = put(line, at, sizeof line, signal_name(number));
    at = put(line, at, sizeof line, " (");
    at = put_decimal(line, at, sizeof line, (unsigned)number);
    at = put(line, at, sizeof line, info->si_code == SI_USER || info->si_code == SI_TKILL ? ", sent by a process" : "");
    at = put(line, at, sizeof line, ") at ");
    at = put_address(line, at, sizeof line, pc);
    at = put(line, at, sizeof line, "; return addresses:");
    // Each frame: [frame] the caller's frame pointer, [frame + 8] the return address. The chain only goes up the
    // stack; it ends at a zero, at a step down, past 8 MiB from the stack pointer, or at an unreadable word.
    uintptr_t words[2];
    int frames = 0;
    // A user-space code address fits in 48 bits on both CPUs; anything wider is not a return address.
    while (frames < frames_max && frame > stack && frame - stack < (8u << 20) && read_words(frame, words) &&
           words[1] != 0 && words[1] >> 48 == 0) {
        at = put(line, at, sizeof line, " ");
        at = put_address(line, at, sizeof line, words[1]);
        frames++;
        if (words[0] <= frame) break;
        frame = words[0];
    }
    if (frames == 0) at = put(line, at, sizeof line, " none");
    if (frames < 3) {
        // A short chain: the signal came in code built without frame pointers (the C library: abort, a
        // system call). The words on the stack that point into the binary's code, nearest first, are then the
        // best lead: most are return addresses, some are stale.
        frames = 0;
        at = put(line, at, sizeof line, "; code addresses on the stack:");
        for (int index = 0; index < scan_words && frames < frames_max; index += 2) {
            if (!read_words(stack + (uintptr_t)index * sizeof(uintptr_t), words)) break;
            for (int word = 0; word < 2 && frames < frames_max; word++) {
                if (!in_code(words[word])) continue;
                at = put(line, at, sizeof line, " ");
                at = put_address(line, at, sizeof line, words[word]);
                frames++;
            }
        }
        if (frames == 0) at = put(line, at, sizeof line, " none");
    }
    at = put(line, at, sizeof line, "; ");
    at = put(line, at, sizeof line, crash_label);
    at = put(line, at, sizeof line, "\n");
    ssize_t written = write(STDERR_FILENO, line, at);
    (void)written;
    // SA_RESETHAND put the default action back: the same signal again ends the process as it would have.
    raise(number);
}

int cprocess_install_crash_report(const char *label) {
    size_t length = strlen(label);
    if (length >= sizeof crash_label) length = sizeof crash_label - 1;
    memcpy(crash_label, label, length);
    crash_label[length] = '\0';
    if (probe[0] < 0 && pipe2(probe, O_CLOEXEC | O_NONBLOCK) != 0) probe[0] = probe[1] = -1;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = report;
    action.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    const int numbers[] = {SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT};
    for (size_t index = 0; index < sizeof numbers / sizeof numbers[0]; index++) {
        if (sigaction(numbers[index], &action, NULL) != 0) return -1;
    }
    return 0;
}
#else
int cprocess_install_crash_report(const char *label) {
    (void)label;
    return -1;
}
#endif
