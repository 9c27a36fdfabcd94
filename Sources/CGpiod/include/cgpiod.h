#ifndef CGPIOD_H
#define CGPIOD_H
// A small, version-independent face over libgpiod for the agent's gpiod backend.
//
// Why a C shim: libgpiod 1.6 (Raspberry Pi OS bookworm) and 2.x (trixie, bookworm-backports) ship the same
// header name with incompatible APIs (v1 has a *function* gpiod_line_request, v2 a *struct* of that name).
// Swift cannot select between them at compile time, the C preprocessor can, so the choice of API is made
// here from the installed header and Swift sees one API whichever libgpiod the device has.
// Every function returns NULL or -1 and leaves errno set on failure.

#include <stdint.h>

/// One requested line (input with both-edge events, or output). Owned by one Swift value; release once.
typedef struct cgpiod_line cgpiod_line;

enum cgpiod_bias {
    CGPIOD_BIAS_AS_IS = 0,
    CGPIOD_BIAS_DISABLED = 1,
    CGPIOD_BIAS_PULL_UP = 2,
    CGPIOD_BIAS_PULL_DOWN = 3,
};

/// Requests `offset` on `chip` (a name such as "gpiochip0", a path, a label or a number) as an input that
/// reports both edges. `debounce_us` is applied in the kernel where the API offers it (v2), else ignored.
cgpiod_line *cgpiod_request_input(const char *chip, unsigned int offset, int active_low, int bias,
                                  unsigned long debounce_us, const char *consumer);
/// Requests `offset` on `chip` as an output driven to `initial` (logical value).
cgpiod_line *cgpiod_request_output(const char *chip, unsigned int offset, int active_low, int initial,
                                   const char *consumer);
/// The file descriptor that becomes readable when an edge event is pending (inputs only).
int cgpiod_event_fd(cgpiod_line *line);
/// Reads one pending event: `*rising` is 1 for a rising (logically active) edge, `*timestamp_ns` is the
/// kernel's timestamp. Returns 0, or -1 with errno.
int cgpiod_read_event(cgpiod_line *line, int *rising, uint64_t *timestamp_ns);
/// Reads the line's logical value: 0 or 1, or -1 with errno.
int cgpiod_get_value(cgpiod_line *line);
/// Drives an output line's logical value. Returns 0, or -1 with errno.
int cgpiod_set_value(cgpiod_line *line, int value);
/// Releases the line and closes its chip.
void cgpiod_release(cgpiod_line *line);
/// Which libgpiod API this shim was built against: 1 or 2.
int cgpiod_api_major(void);
/// The run-time library's version string.
const char *cgpiod_library_version(void);

#endif
