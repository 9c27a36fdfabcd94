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

#else  // libgpiod 2.x

#include <dirent.h>
#include <stdio.h>
#include <string.h>

struct cgpiod_line {
    struct gpiod_chip *chip;
    struct gpiod_line_request *request;
    struct gpiod_edge_event_buffer *events;
    unsigned int offset;
};

// v2 opens chips by path only; accept what v1's gpiod_chip_open_lookup accepted: a path, "gpiochipN",
// a number, or the chip's label (the Raspberry Pi 5's RP1 is "pinctrl-rp1").
static struct gpiod_chip *v2_open(const char *name) {
    char path[64];
    if (name[0] == '/') return gpiod_chip_open(name);
    if (strncmp(name, "gpiochip", 8) == 0) {
        snprintf(path, sizeof path, "/dev/%s", name);
        return gpiod_chip_open(path);
    }
    char *end = NULL;
    unsigned long number = strtoul(name, &end, 10);
    if (end && *end == '\0' && end != name) {
        snprintf(path, sizeof path, "/dev/gpiochip%lu", number);
        return gpiod_chip_open(path);
    }
    DIR *dev = opendir("/dev");
    if (!dev) return NULL;
    struct dirent *entry;
    while ((entry = readdir(dev)) != NULL) {
        if (strncmp(entry->d_name, "gpiochip", 8) != 0) continue;
        snprintf(path, sizeof path, "/dev/%s", entry->d_name);
        struct gpiod_chip *chip = gpiod_chip_open(path);
        if (!chip) continue;
        struct gpiod_chip_info *info = gpiod_chip_get_info(chip);
        int match = info && strcmp(gpiod_chip_info_get_label(info), name) == 0;
        if (info) gpiod_chip_info_free(info);
        if (match) { closedir(dev); return chip; }
        gpiod_chip_close(chip);
    }
    closedir(dev);
    errno = ENOENT;
    return NULL;
}

static enum gpiod_line_bias v2_bias(int bias) {
    switch (bias) {
    case CGPIOD_BIAS_DISABLED: return GPIOD_LINE_BIAS_DISABLED;
    case CGPIOD_BIAS_PULL_UP: return GPIOD_LINE_BIAS_PULL_UP;
    case CGPIOD_BIAS_PULL_DOWN: return GPIOD_LINE_BIAS_PULL_DOWN;
    default: return GPIOD_LINE_BIAS_AS_IS;
    }
}

static cgpiod_line *v2_request(const char *chip_name, unsigned int offset, struct gpiod_line_settings *settings,
                               const char *consumer, int want_events) {
    cgpiod_line *result = NULL;
    struct gpiod_line_config *line_config = NULL;
    struct gpiod_request_config *request_config = NULL;
    struct gpiod_chip *chip = v2_open(chip_name);
    int error = errno;
    if (!chip) goto done;
    line_config = gpiod_line_config_new();
    request_config = gpiod_request_config_new();
    if (!line_config || !request_config) { error = ENOMEM; goto done; }
    if (gpiod_line_config_add_line_settings(line_config, &offset, 1, settings) < 0) { error = errno; goto done; }
    gpiod_request_config_set_consumer(request_config, consumer);
    struct gpiod_line_request *request = gpiod_chip_request_lines(chip, request_config, line_config);
    if (!request) { error = errno; goto done; }
    result = calloc(1, sizeof *result);
    if (!result) { gpiod_line_request_release(request); error = ENOMEM; goto done; }
    result->chip = chip;
    result->request = request;
    result->offset = offset;
    if (want_events) {
        result->events = gpiod_edge_event_buffer_new(16);
        if (!result->events) {
            gpiod_line_request_release(request);
            free(result);
            result = NULL;
            error = ENOMEM;
            goto done;
        }
    }
    chip = NULL;  // owned by result
done:
    if (line_config) gpiod_line_config_free(line_config);
    if (request_config) gpiod_request_config_free(request_config);
    gpiod_line_settings_free(settings);
    if (chip) gpiod_chip_close(chip);
    if (!result) errno = error;
    return result;
}

cgpiod_line *cgpiod_request_input(const char *chip, unsigned int offset, int active_low, int bias,
                                  unsigned long debounce_us, const char *consumer) {
    struct gpiod_line_settings *settings = gpiod_line_settings_new();
    if (!settings) { errno = ENOMEM; return NULL; }
    gpiod_line_settings_set_direction(settings, GPIOD_LINE_DIRECTION_INPUT);
    gpiod_line_settings_set_edge_detection(settings, GPIOD_LINE_EDGE_BOTH);
    gpiod_line_settings_set_bias(settings, v2_bias(bias));
    gpiod_line_settings_set_active_low(settings, active_low != 0);
    // The kernel debounces (where the chip supports it); the agent's software debounce still runs on top.
    gpiod_line_settings_set_debounce_period_us(settings, debounce_us);
    return v2_request(chip, offset, settings, consumer, 1);
}

cgpiod_line *cgpiod_request_output(const char *chip, unsigned int offset, int active_low, int initial,
                                   const char *consumer) {
    struct gpiod_line_settings *settings = gpiod_line_settings_new();
    if (!settings) { errno = ENOMEM; return NULL; }
    gpiod_line_settings_set_direction(settings, GPIOD_LINE_DIRECTION_OUTPUT);
    gpiod_line_settings_set_active_low(settings, active_low != 0);
    gpiod_line_settings_set_output_value(settings, initial ? GPIOD_LINE_VALUE_ACTIVE : GPIOD_LINE_VALUE_INACTIVE);
    return v2_request(chip, offset, settings, consumer, 0);
}

int cgpiod_event_fd(cgpiod_line *line) { return gpiod_line_request_get_fd(line->request); }

int cgpiod_read_event(cgpiod_line *line, int *rising, uint64_t *timestamp_ns) {
    if (gpiod_line_request_read_edge_events(line->request, line->events, 1) < 1) return -1;
    struct gpiod_edge_event *event = gpiod_edge_event_buffer_get_event(line->events, 0);
    if (!event) { errno = EIO; return -1; }
    *rising = gpiod_edge_event_get_event_type(event) == GPIOD_EDGE_EVENT_RISING_EDGE;
    *timestamp_ns = gpiod_edge_event_get_timestamp_ns(event);
    return 0;
}

int cgpiod_get_value(cgpiod_line *line) {
    enum gpiod_line_value value = gpiod_line_request_get_value(line->request, line->offset);
    if (value == GPIOD_LINE_VALUE_ERROR) return -1;
    return value == GPIOD_LINE_VALUE_ACTIVE;
}

int cgpiod_set_value(cgpiod_line *line, int value) {
    return gpiod_line_request_set_value(line->request, line->offset,
                                        value ? GPIOD_LINE_VALUE_ACTIVE : GPIOD_LINE_VALUE_INACTIVE);
}

void cgpiod_release(cgpiod_line *line) {
    if (!line) return;
    if (line->events) gpiod_edge_event_buffer_free(line->events);
    gpiod_line_request_release(line->request);
    gpiod_chip_close(line->chip);
    free(line);
}

int cgpiod_api_major(void) { return 2; }

const char *cgpiod_library_version(void) { return gpiod_api_version(); }

#endif
