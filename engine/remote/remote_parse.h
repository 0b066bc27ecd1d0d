/* remote_parse: the remote engine's readers of what a server sends outside
 * the OpenAI chunk format (oai_response does that): the context length in
 * a /v1/models answer and llama-server's /props, llama-server's per-request
 * "timings" object, and tern serve's /v1/tern/status. Pure functions over
 * untrusted bytes (no sockets, no engine state), so fuzz_remote drives them
 * exactly as the engine does. Numbers out of range read as absent. */
#ifndef TERN_REMOTE_PARSE_H
#define TERN_REMOTE_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* GET /v1/models: the first entry's id (malloc'd, NULL when absent),
 * owned_by (printable, truncated; "" when absent), context length (0 =
 * not said) and the key's cap per request (0 = none said). Returns 0, or -1 when the body is not JSON. */
struct remote_models {
    char *id;
    char owned_by[16];
    int32_t n_ctx;
    int32_t max_tokens_cap;   /* tern serve's tern.max_tokens_cap for this key; 0 = none */
};
int remote_parse_models(const char *body, size_t len, struct remote_models *out);
/* llama-server's GET /props: default_generation_settings.n_ctx, or an older
 * top-level n_ctx; 0 when neither. */
int32_t remote_parse_props_ctx(const char *body, size_t len);
/* llama-server's "timings" in a chunk: fills m's n_cached, n_computed and
 * server prefill/decode/tpot; returns whether the object was there. */
bool remote_parse_timings(const char *data, size_t len, struct engine_metrics *m);
/* tern serve's /v1/tern/status into out (KV blocks, steps, recent requests,
 * tenants); out is zeroed first. Returns 0, or -1 when a field is missing. */
int remote_parse_status(const char *body, size_t len, struct engine_stats *out);

#endif
