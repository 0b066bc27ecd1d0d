/* http_server: tern serve's HTTP front end (libmicrohttpd), a second front
 * end beside the TUI over the engine API; the engine knows nothing of HTTP.
 *
 * Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
 * /health, /ready, /metrics, /v1/tern/status. The OpenAI mapping lives in
 * engine/wire; this folder adds the edge: keys and quotas (http_auth),
 * request ids (http_reqid), the access log (http_log), Prometheus
 * (http_metrics), streams (http_stream) and the routes (http_routes).
 *
 * Lifecycle: http_server_open starts listening at once (/health answers
 * while the model loads); http_server_set_engine hands over an engine that
 * has passed its warm-up (then /ready is 200); http_server_drain stops taking
 * requests and lets streams finish; http_server_close stops everything. The
 * engine stays the caller's (closed after http_server_close).
 *
 * Threads: one per connection (bounded by max_conns); each stream's thread
 * drains its own request's events (engine_poll_request), so a client that
 * stops reading leaves its events undrained and the engine ends it as
 * consumer-stalled while the others go on. */
#ifndef TERN_HTTP_SERVER_H
#define TERN_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct engine;
struct store;
struct http_server;

struct http_config {
    const char *host;           /* bind address; default 127.0.0.1 */
    int port;                   /* 0: an ephemeral port (see http_server_port) */
    const char *api_key_file;   /* NULL: no keys */
    bool insecure;              /* allow a non-loopback bind without keys */
    const char *access_log;     /* NULL: default path; "-": stderr */
    bool log_content;           /* put prompts into the access log */
    struct store *store;        /* history (borrowed); NULL: off */
    const char *model_path;     /* for history rows */
    const char *model_id;       /* the name /v1/models lists (fixed before the load,
                                   so that no thread ever sees it change) */
    size_t max_body;            /* bytes; default 8 MiB */
    int max_conns;              /* default 256 */
    int conn_timeout_s;         /* idle / slow client drop; default 15 */
    double queue_timeout_s;     /* engine admission wait; default 60 (504 after) */
    int32_t max_tokens_default; /* when a request gives none; default 0 (context limit) */
    bool cache_text;            /* GET /v1/tern/cache shows prefixes' opening text */
};

int http_server_open(struct http_server **out, const struct http_config *c, char *err,
                     size_t errlen);
int http_server_port(const struct http_server *s);
/* The engine has loaded and passed its warm-up: serve it. */
void http_server_set_engine(struct http_server *s, struct engine *e);
/* Stops taking new requests (/ready 503, completions 503), waits up to
 * timeout_s for running requests, then cancels those left (their streams
 * end with a final chunk whose finish_reason is "cancelled"). Returns the
 * number cancelled. */
int http_server_drain(struct http_server *s, double timeout_s);
/* Once a second or so: drops the connections of streams whose client has
 * not taken a byte for the connection timeout (a reader that stopped: the
 * engine has ended its request as consumer-stalled; this frees the thread).
 * Returns how many were dropped. */
int http_server_tick(struct http_server *s);
/* Number of completions in flight. */
int http_server_active(struct http_server *s);
void http_server_close(struct http_server *s);

#endif
