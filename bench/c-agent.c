// The C floor of scripts/bench.sh: the smallest honest program doing the agent's job on a simulated button,
// with the same libcurl and libgpiod the agent links. Not part of the device; built by the bench with `cc`, and
// by scripts/vm-boot-test.sh for the booted device's CPU (`scripts/arm64.sh c-floor` for arm64), where it runs
// beside the agent in the same boot.
//
// Its job, step for step what `replenish-agent run` does for a short press on the simulated board:
// - a "line": raw edges arrive on a FIFO as 9-byte records, '1' (active) or '0' (inactive) and the edge's
//   CLOCK_MONOTONIC time in nanoseconds (int64, host order), as gpiod reports an edge with the kernel's
//   timestamp (the simulated board's control socket carries the same edges to the agent); debounced exactly
//   like ButtonDebouncer, by the edges' times (a level counts once it has held for the debounce period; a
//   press is a settled active level followed by a settled release; a change whose debounce period ended before
//   the next edge settles at that edge's time first, as InputPipeline.receive does, so edges read in one batch
//   are not merged);
// - a short press is written durably before anything is sent (the outbox: temp file, fsync, rename, fsync of
//   the folder, as POSIX.writeFileAtomically), marked as sending (written again), then sent as DRS's
//   replenish call: POST {url} with `Authorization: Bearer <token>`, the two version headers of DRSClient
//   and no `Expect`, HTTP/1.1 on a fresh connection closed after the answer, the agent's timeouts;
// - the answer's status and detailCode are recorded (outbox emptied, status file written: two more atomic
//   writes, as OrderService and StatusBook do);
// - READY=1 is sent to $NOTIFY_SOCKET once the line, the state folder and libcurl are set up.
// No threads; poll(2) blocks with no timeout unless a debounce is settling, so an idle program never wakes.
//
// Usage: c-agent FIFO STATE_DIR URL TOKEN_FILE [DEBOUNCE_MS]
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <gpiod.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *state_dir;
static char answer[16384];
static size_t answer_length;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);  // the clock of gpiod's edge timestamps
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *what) {
    fprintf(stderr, "c-agent: %s: %s\n", what, strerror(errno));
    exit(1);
}

// Temp file (0600), write, fsync, rename over the name, fsync the folder.
static void write_atomically(const char *name, const char *text) {
    char path[4096], temp[4200];
    snprintf(path, sizeof path, "%s/%s", state_dir, name);
    snprintf(temp, sizeof temp, "%s.tmp-%d", path, (int)getpid());
    int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) die("create");
    size_t length = strlen(text), written = 0;
    while (written < length) {
        ssize_t count = write(fd, text + written, length - written);
        if (count < 0 && errno == EINTR) continue;
        if (count <= 0) die("write");
        written += (size_t)count;
    }
    if (fchmod(fd, 0600) != 0 || fsync(fd) != 0) die("fsync");
    close(fd);
    if (rename(temp, path) != 0) die("rename");
    int dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) die("fsync folder");
    close(dfd);
}

static size_t collect(char *data, size_t size, size_t count, void *unused) {
    (void)unused;
    size_t length = size * count;
    if (answer_length + length >= sizeof answer) return 0;  // too large: abort, as the agent's limit does
    memcpy(answer + answer_length, data, length);
    answer_length += length;
    answer[answer_length] = 0;
    return length;
}

static void notify_ready(void) {
    const char *name = getenv("NOTIFY_SOCKET");
    if (!name || !*name) return;
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    socklen_t length;
    size_t name_length = strlen(name);
    if (name_length >= sizeof address.sun_path) return;
    memcpy(address.sun_path, name, name_length);
    if (name[0] == '@') address.sun_path[0] = 0;
    length = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + name_length);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    const char message[] = "READY=1\nSTATUS=c-agent ready\n";
    sendto(fd, message, sizeof message - 1, MSG_NOSIGNAL, (struct sockaddr *)&address, length);
    close(fd);
}

// One replenish call, as DRSClient + CurlEasy make it. Returns the HTTP status (0: no answer).
static long replenish(CURL *curl, const char *url, struct curl_slist *headers) {
    curl_easy_reset(curl);
    answer_length = 0;
    answer[0] = 0;
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_PROXY, "");
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(curl, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    curl_easy_setopt(curl, CURLOPT_COPYPOSTFIELDS, "");
    if (curl_easy_perform(curl) != CURLE_OK) return 0;
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

static void order(CURL *curl, const char *url, struct curl_slist *headers, unsigned long sequence) {
    char text[8192];
    snprintf(text, sizeof text, "{\"pending\":[{\"seq\":%lu,\"slot\":\"slot\",\"sending\":false}]}\n", sequence);
    write_atomically("outbox.json", text);
    snprintf(text, sizeof text, "{\"pending\":[{\"seq\":%lu,\"slot\":\"slot\",\"sending\":true}]}\n", sequence);
    write_atomically("outbox.json", text);
    long status = replenish(curl, url, headers);
    char detail[64] = "none";
    const char *found = strstr(answer, "\"detailCode\"");
    if (found && (found = strchr(found + 12, '"'))) sscanf(found + 1, "%63[A-Z_]", detail);
    write_atomically("outbox.json", "{\"pending\":[]}\n");
    snprintf(text, sizeof text, "{\"orders\":%lu,\"lastStatus\":%ld,\"lastResult\":\"%s\"}\n", sequence, status,
             detail);
    write_atomically("status.json", text);
}

// The debouncer: the raw level, the settled one, the last change's time (ms), the settled press's start.
static int raw = 0, settled = 0;
static long long last_edge = -1, press_started = 0, debounce = 30;

// Settles a change whose debounce period has passed at `at` (ms). 1 when it is a release that ends a short press
// (not a long one): a press to order.
static int settle(long long at) {
    if (raw == settled || last_edge < 0 || at < last_edge + debounce) return 0;
    settled = raw;
    if (settled) press_started = last_edge;
    return !settled && last_edge - press_started < 5000;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: c-agent FIFO STATE_DIR URL TOKEN_FILE [DEBOUNCE_MS]\n");
        return 2;
    }
    state_dir = argv[2];
    const char *url = argv[3];
    if (argc > 5) debounce = atoll(argv[5]);
    // The line: O_RDWR so that the FIFO never reports end of file between writers.
    int line = open(argv[1], O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (line < 0) die("open the line");
    // libgpiod is linked and loaded as in the agent; the simulated line needs none of its calls.
#ifdef GPIOD_API
    if (!gpiod_version_string()) return 1;
#else
    if (!gpiod_api_version()) return 1;
#endif
    char token[4096];
    FILE *file = fopen(argv[4], "re");
    if (!file || !fgets(token, sizeof token, file)) die("read the token");
    fclose(file);
    token[strcspn(token, "\r\n")] = 0;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 1;
    CURL *curl = curl_easy_init();
    if (!curl) return 1;
    char authorization[4200];
    snprintf(authorization, sizeof authorization, "Authorization: Bearer %s", token);
    struct curl_slist *headers = curl_slist_append(NULL, authorization);
    headers = curl_slist_append(headers, "x-amzn-type-version: com.amazon.dash.replenishment.DrsReplenishInput@1.0");
    headers = curl_slist_append(headers, "x-amzn-accept-type: com.amazon.dash.replenishment.DrsReplenishResult@1.0");
    headers = curl_slist_append(headers, "Expect:");
    mkdir(state_dir, 0700);
    notify_ready();

    unsigned long orders = 0;
    char bytes[9 * 28];  // the line's bytes not yet used: whole records, then a piece of the next one
    size_t held = 0;
    for (;;) {
        int timeout = -1;
        if (raw != settled && last_edge >= 0) {
            long long left = last_edge + debounce - now_ms();
            timeout = left > 0 ? (int)left : 0;
        }
        struct pollfd descriptor = {.fd = line, .events = POLLIN};
        int ready = poll(&descriptor, 1, timeout);
        if (ready < 0 && errno != EINTR) die("poll");
        if (ready > 0) {
            // A FIFO is a byte stream: a record may arrive in pieces (a writer that flushes mid-record, as bash's
            // line-buffered printf does at a 0x0a byte), so the tail of a read waits for the rest.
            ssize_t count = read(line, bytes + held, sizeof bytes - held);
            if (count > 0) held += (size_t)count;
            size_t i = 0;
            for (; i + 9 <= held; i += 9) {
                if (bytes[i] != '0' && bytes[i] != '1') continue;
                long long nanoseconds;
                memcpy(&nanoseconds, bytes + i + 1, sizeof nanoseconds);
                long long at = nanoseconds / 1000000;
                if (settle(at)) order(curl, url, headers, ++orders);
                int active = bytes[i] == '1';
                if (active != raw || last_edge < 0) last_edge = at;
                raw = active;
            }
            memmove(bytes, bytes + i, held - i);
            held -= i;
        }
        if (settle(now_ms())) order(curl, url, headers, ++orders);
    }
}
