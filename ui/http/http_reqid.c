/* http_reqid: validate or generate request ids. */
#include "http_reqid.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

bool http_reqid_valid(const char *s)
{
    if (!s) return false;
    size_t n = strlen(s);
    if (n == 0 || n > HTTP_REQID_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\') return false;
    }
    return true;
}

void http_reqid_new(char out[HTTP_REQID_MAX + 1])
{
    unsigned char b[12];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        /* no entropy (very early boot): time and address still tell ids apart */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uintptr_t)out;
        for (size_t i = 0; i < sizeof b; i++) b[i] = (unsigned char)(x >> (i % 8 * 8)) ^ (unsigned char)i;
    }
    char *o = out + sprintf(out, "req-");
    for (size_t i = 0; i < sizeof b; i++) o += sprintf(o, "%02x", b[i]);
}

bool http_reqid_take(const char *client, char out[HTTP_REQID_MAX + 1])
{
    if (http_reqid_valid(client)) {
        snprintf(out, HTTP_REQID_MAX + 1, "%s", client);
        return true;
    }
    http_reqid_new(out);
    return false;
}
