/* http_auth: API keys, tenants and per-tenant quotas for tern serve.
 *
 * Key file: one key per line, "KEY tenant=NAME [priority=interactive|batch]
 * [rpm=N] [burst=N] [tpm=N] [max_tokens=N] [concurrency=N]"; '#' starts a
 * comment.
 * Keys are compared in constant time and never logged. Without a key file
 * every request is the tenant "default" with no limits.
 *
 * Quotas are token buckets refilled continuously (rpm requests and tpm
 * tokens per 60 s; capacity one minute's worth, or burst requests) plus a
 * concurrent-request cap. Admission takes one request and the prompt tokens; the generated
 * tokens are charged when the request ends (the bucket may go below zero,
 * which delays the tenant's next request). Thread-safe. */
#ifndef TERN_HTTP_AUTH_H
#define TERN_HTTP_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

struct http_tenant {
    char name[64];
    enum engine_priority priority;
    int64_t rpm, tpm;          /* 0 = unlimited */
    int64_t burst;             /* requests the rpm bucket holds; default rpm */
    int32_t max_tokens;        /* 0 = no cap */
    int32_t concurrency;       /* 0 = no cap */
    /* state (under the auth lock) */
    double req_tokens, tok_tokens, t_refill;
    int32_t running;
    uint64_t n_requests, n_prompt, n_generated, n_rejected;
};

struct http_auth;

/* path NULL: no keys (one unlimited "default" tenant). Returns 0, or -1
 * with a message naming the file and line. */
int http_auth_open(struct http_auth **out, const char *path, char *err, size_t errlen);
void http_auth_close(struct http_auth *a);
bool http_auth_has_keys(const struct http_auth *a);

/* The tenant of an "Authorization: Bearer KEY" header value (may be NULL),
 * or NULL when keys are required and it is missing or unknown. */
struct http_tenant *http_auth_check(struct http_auth *a, const char *authorization);

/* Admission of one request of prompt_tokens + max_tokens (max_tokens is
 * already capped, and the sum within tpm: a request over a per-request cap
 * can never pass, and is the caller's to refuse with a 400). Returns 0 (taken: the caller must call http_auth_release
 * later), or -1 with the limit's name ("rpm", "tpm", "concurrency") in
 * *limit and the seconds until it would pass in *retry_after_s. */
int http_auth_admit(struct http_auth *a, struct http_tenant *t, int64_t prompt_tokens,
                    int64_t max_tokens, const char **limit, double *retry_after_s);
/* Ends an admitted request: frees its concurrency slot, charges generated tokens. */
void http_auth_release(struct http_auth *a, struct http_tenant *t, int64_t generated);
/* Counts a rejection against the tenant (metrics). */
void http_auth_count_reject(struct http_auth *a, struct http_tenant *t);

/* Visits every tenant under the lock (metrics exposition). */
void http_auth_each(struct http_auth *a, void (*fn)(void *ud, const struct http_tenant *t),
                    void *ud);

#endif
