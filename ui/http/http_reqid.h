/* http_reqid: request ids. A client's X-Request-Id is kept when it is 1..128
 * printable ASCII characters (no space, quote or backslash), else a new one
 * is made: "req-" and 24 hex digits from the kernel's random source. */
#ifndef TERN_HTTP_REQID_H
#define TERN_HTTP_REQID_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_REQID_MAX 128

bool http_reqid_valid(const char *s);
/* Copies the client's id when valid, else generates one; out has
 * HTTP_REQID_MAX + 1 bytes. Returns true when the client's id was kept. */
bool http_reqid_take(const char *client, char out[HTTP_REQID_MAX + 1]);
/* "req-" + 24 hex digits. */
void http_reqid_new(char out[HTTP_REQID_MAX + 1]);

#endif
