#define _GNU_SOURCE
#include "cfloor.h"
#include <curl/curl.h>
#include <gpiod.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static CURL *easy;

int cfloor_curl_setup(void) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return -1;
    easy = curl_easy_init();
    return easy ? 0 : -1;
}

const char *cfloor_gpiod_version(void) {
#ifdef GPIOD_LINE_BULK_MAX_LINES
    return gpiod_version_string();
#else
    return gpiod_api_version();
#endif
}

int cfloor_notify_ready(void) {
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path) return 0;
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(address.sun_path)) return -1;
    strcpy(address.sun_path, path);
    if (address.sun_path[0] == '@') address.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    static const char message[] = "READY=1";
    ssize_t sent = sendto(fd, message, sizeof message - 1, 0, (struct sockaddr *)&address,
                          (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path)));
    close(fd);
    return sent < 0 ? -1 : 0;
}
