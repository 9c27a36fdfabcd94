#include "cgpiod.h"

#include <errno.h>
#include <gpiod.h>
#include <stdlib.h>

// libgpiod 1.x defines the line-bulk API and its size macro; 2.x removed both.
#if defined(GPIOD_LINE_BULK_MAX_LINES)

struct cgpiod_line {
    struct gpiod_chip *chip;
    struct gpiod_line *line;
};

static int v1_flags(int active_low, int bias) {
    int flags = active_low ? GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW : 0;
    switch (bias) {
    case CGPIOD_BIAS_DISABLED: flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_DISABLE; break;
    case CGPIOD_BIAS_PULL_UP: flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP; break;
    case CGPIOD_BIAS_PULL_DOWN: flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN; break;
    default: break;
    }
    return flags;
}

static cgpiod_line *v1_request(const char *chip_name, unsigned int offset, int type, int flags, int initial,
                               const char *consumer) {
    struct gpiod_chip *chip = gpiod_chip_open_lookup(chip_name);
    if (!chip) return NULL;
    struct gpiod_line *line = gpiod_chip_get_line(chip, offset);
    if (!line) { int e = errno; gpiod_chip_close(chip); errno = e; return NULL; }
    struct gpiod_line_request_config config = { .consumer = consumer, .request_type = type, .flags = flags };
    if (gpiod_line_request(line, &config, initial) < 0) {
        int e = errno; gpiod_chip_close(chip); errno = e; return NULL;
    }
    cgpiod_line *result = malloc(sizeof *result);
    if (!result) { gpiod_line_release(line); gpiod_chip_close(chip); errno = ENOMEM; return NULL; }
    result->chip = chip;
    result->line = line;
    return result;
}

cgpiod_line *cgpiod_request_input(const char *chip, unsigned int offset, int active_low, int bias,
                                  unsigned long debounce_us, const char *consumer) {
    (void)debounce_us; // v1 has no kernel debounce; the agent debounces in software.
    return v1_request(chip, offset, GPIOD_LINE_REQUEST_EVENT_BOTH_EDGES, v1_flags(active_low, bias), 0, consumer);
}

cgpiod_line *cgpiod_request_output(const char *chip, unsigned int offset, int active_low, int initial,
                                   const char *consumer) {
    return v1_request(chip, offset, GPIOD_LINE_REQUEST_DIRECTION_OUTPUT, v1_flags(active_low, CGPIOD_BIAS_AS_IS),
                      initial, consumer);
}

int cgpiod_event_fd(cgpiod_line *line) { return gpiod_line_event_get_fd(line->line); }

int cgpiod_read_event(cgpiod_line *line, int *rising, uint64_t *timestamp_ns) {
    struct gpiod_line_event event;
    if (gpiod_line_event_read(line->line, &event) < 0) return -1;
    *rising = event.event_type == GPIOD_LINE_EVENT_RISING_EDGE;
    *timestamp_ns = (uint64_t)event.ts.tv_sec * 1000000000ull + (uint64_t)event.ts.tv_nsec;
    return 0;
}

int cgpiod_get_value(cgpiod_line *line) { return gpiod_line_get_value(line->line); }

int cgpiod_set_value(cgpiod_line *line, int value) { return gpiod_line_set_value(line->line, value); }

void cgpiod_release(cgpiod_line *line) {
    if (!line) return;
    gpiod_line_release(line->line);
    gpiod_chip_close(line->chip);
    free(line);
}

int cgpiod_api_major(void) { return 1; }

const char *cgpiod_library_version(void) { return gpiod_version_string(); }

#else
#error "libgpiod 2.x API support is not written yet (issue 4); build against libgpiod 1.6 (libgpiod-dev)"
#endif
