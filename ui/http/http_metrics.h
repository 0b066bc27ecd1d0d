/* http_metrics: what /metrics exposes beyond the engine's snapshot (the
 * per-request histograms in vLLM's bucket boundaries, HTTP status and
 * rejection counters) and the last N requests for /v1/tern/status.
 * Thread-safe (one lock). The exposition is Prometheus text format 0.0.4:
 * vLLM's metric names with model_name, plus tern: metrics. */
#ifndef TERN_HTTP_METRICS_H
#define TERN_HTTP_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

struct cJSON;
struct http_metrics;
struct http_auth;
struct sse_buf;

#define HTTP_RECENT 32

int http_metrics_open(struct http_metrics **out);
void http_metrics_close(struct http_metrics *m);

/* One HTTP response sent (any route). */
void http_metrics_status(struct http_metrics *hm, int code);
/* A request refused before or by the engine; reason: "rpm", "tpm",
 * "concurrency", "queue_full", "too_large", "auth", "bad_request", ... */
void http_metrics_reject(struct http_metrics *hm, const char *reason);
/* A finished engine request (histograms, token counters, the recent list). */
void http_metrics_finish(struct http_metrics *hm, const struct engine_metrics *m,
                         const char *request_id, const char *tenant, const char *route,
                         bool disconnected);

/* Appends the whole exposition to out. e may be NULL (still loading). */
int http_metrics_expose(struct http_metrics *hm, struct engine *e, const char *model_name,
                        struct http_auth *auth, struct sse_buf *out);
/* The last HTTP_RECENT finished requests, newest first, as a JSON array. */
struct cJSON *http_metrics_recent_json(struct http_metrics *hm);

#endif
