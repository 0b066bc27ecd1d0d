/* http_log: the access log, one JSON object per line per request: time,
 * request id, tenant, route, status code, model, prompt / cached / generated
 * tokens, queue, prefill, TTFT, decode, TPOT, E2E, finish reason or error,
 * client-disconnect flag (and the messages only with log_content). Lines are
 * written whole under a lock and flushed, so a crash loses at most one. */
#ifndef TERN_HTTP_LOG_H
#define TERN_HTTP_LOG_H

#include <stdbool.h>
#include <stddef.h>

#include "engine.h"

struct http_log;

/* One finished HTTP request. m may be NULL (refused before the engine). */
struct http_log_rec {
    const char *request_id, *tenant, *method, *route, *model;
    int status;                     /* HTTP status sent */
    const char *finish;             /* finish reason, or NULL */
    const char *error;              /* error message, or NULL */
    bool disconnected;              /* the client went away before the end */
    bool stream;
    const struct engine_metrics *m;
    const char *content;            /* prompt text when --log-content, else NULL */
    double http_s;                  /* seconds from the request's first byte to now */
};

/* ${XDG_STATE_HOME:-$HOME/.local/state}/tern/access.log */
void http_log_default_path(char *buf, size_t n);
/* Opens path for appending (folders made 0700, file 0600). path "-" is
 * stderr. Returns 0, or -1 with a message. */
int http_log_open(struct http_log **out, const char *path, char *err, size_t errlen);
void http_log_close(struct http_log *l);
/* Writes one line; l NULL does nothing. */
void http_log_write(struct http_log *l, const struct http_log_rec *r);

#endif
