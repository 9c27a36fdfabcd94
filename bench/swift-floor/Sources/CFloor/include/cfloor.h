// libcurl and libgpiod set up the way the agent's start and the C floor (bench/c-agent.c) set them up.
#ifndef CFLOOR_H
#define CFLOOR_H

/// curl_global_init and one easy handle, kept: 0 on success.
int cfloor_curl_setup(void);
/// libgpiod's version text (links the library as the agent does).
const char *cfloor_gpiod_version(void);
/// READY=1 to $NOTIFY_SOCKET if it is set: 0 when sent or not asked for.
int cfloor_notify_ready(void);

#endif
