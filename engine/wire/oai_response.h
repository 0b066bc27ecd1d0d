/* oai_response: the OpenAI response wire format of the engine API, both ways.
 *
 * Server side (builders, each returns a malloc'd NUL-terminated JSON string,
 * NULL on out-of-memory):
 *   oai_response_build   one non-streamed response (chat.completion / text_completion)
 *   oai_chunk_build      one streamed chunk (chat.completion.chunk / text_completion)
 *   oai_error_build      {"error": {"message", "type", "param", "code"}}
 * Every final response and the final usage chunk carry "usage" (with
 * prompt_tokens_details.cached_tokens) and tern's per-request phase block
 * under "tern" (oai_tern_json).
 *
 * Client side: oai_response_parse reads any of those JSON texts back into a
 * struct oai_parsed (text delta, finish reason, usage, tern block, error).
 *
 * Time: "created" is unix seconds, supplied by the caller. */
#ifndef TERN_OAI_RESPONSE_H
#define TERN_OAI_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "oai_request.h"

struct cJSON;

/* What every response of one request shares. */
struct oai_resp_ctx {
    enum oai_kind kind;
    const char *id;          /* "chatcmpl-..." / "cmpl-..." */
    const char *model;       /* model name echoed */
    int64_t created;         /* unix seconds */
    const char *request_id;  /* X-Request-Id, echoed in the tern block; may be NULL */
};

struct oai_usage {
    int32_t prompt_tokens, completion_tokens, cached_tokens; /* total = prompt + completion */
};
void oai_usage_from_metrics(struct oai_usage *u, const struct engine_metrics *m);

/* finish_reason of an engine status: "stop" (ok, stop), "length", else the
 * engine's status name ("cancelled", "consumer-stalled", ...), so a stream
 * cut by the server says why. oai_finish_status is the reverse (-1 unknown). */
const char *oai_finish_reason(enum engine_status s);
int oai_finish_status(const char *reason);

/* The "tern" phase block: status, queue/prefill/ttft/tpot/decode/e2e
 * seconds, prompt/cached/computed/generated tokens, preemptions, priority,
 * and request_id when given. Caller frees with cJSON_Delete. */
struct cJSON *oai_tern_json(const struct engine_metrics *m, const char *request_id);
/* Reads a tern block into m (token_t stays NULL); request_id (may be NULL)
 * receives the echoed id. Returns 0, or -1 when j is not an object. */
int oai_tern_parse(const struct cJSON *j, struct engine_metrics *m, char *request_id,
                   size_t idlen);

/* Non-streamed: text is the whole reply; m gives finish reason, usage, tern. */
char *oai_response_build(const struct oai_resp_ctx *c, const char *text,
                         const struct engine_metrics *m);

/* One stream chunk. Chat: the first chunk should have role = true (delta
 * {"role":"assistant","content":""}). delta may be NULL (no content field).
 * finish: NULL, or the finish reason of the last content chunk.
 * usage_m: NULL, or the metrics of the final usage chunk (choices = [],
 * "usage" and "tern" set), sent when stream_options.include_usage; a chunk
 * with finish set also carries "tern" when usage_m is given. */
char *oai_chunk_build(const struct oai_resp_ctx *c, bool role, const char *delta,
                      const char *finish, const struct engine_metrics *usage_m);

/* The same with a choice's "logprobs" (and, for the whole response, vLLM's
 * "prompt_logprobs"): cJSON trees from oai_logprobs.h, taken (freed) by the
 * call whatever it returns; NULL leaves the field null / absent. */
char *oai_response_build_lp(const struct oai_resp_ctx *c, const char *text,
                            const struct engine_metrics *m, struct cJSON *logprobs,
                            struct cJSON *prompt_logprobs);
char *oai_chunk_build_lp(const struct oai_resp_ctx *c, bool role, const char *delta,
                         const char *finish, const struct engine_metrics *usage_m,
                         struct cJSON *logprobs);

/* type: "invalid_request_error", "authentication_error", "rate_limit_error",
 * "not_found_error", "server_error", ...; param and code may be NULL. */
char *oai_error_build(const char *message, const char *type, const char *param,
                      const char *code);

/* One parsed response, chunk or error. Strings are owned (oai_parsed_free). */
struct oai_parsed {
    char *id, *object, *model;
    char *role;                     /* delta.role or message.role, or NULL */
    char *text;                     /* delta.content / message.content / choices[0].text;
                                       NULL when absent */
    bool has_choice;                /* choices had an entry */
    char *finish_reason;            /* NULL while streaming */
    bool has_usage;
    struct oai_usage usage;
    bool has_tern;
    struct engine_metrics tern;     /* token_t NULL */
    char request_id[128];           /* from the tern block, "" if absent */
    bool is_error;                  /* {"error": {...}} */
    char *error_message, *error_type, *error_param, *error_code;
};
/* Parses json[0..len). Returns 0, or -1 with err (not JSON, not an object,
 * a field of the wrong type). */
int oai_response_parse(const char *json, size_t len, struct oai_parsed *out, char *err,
                       size_t errlen);
void oai_parsed_free(struct oai_parsed *p);

#endif
