/* oai_request: the OpenAI request wire format of the engine API, both ways.
 *
 *   oai_request_parse: untrusted JSON body of POST /v1/chat/completions or
 *     /v1/completions -> struct engine_request (validated: UTF-8, JSON, every
 *     field's type and range; a failure names the field in a 400 message).
 *   oai_request_build: struct engine_request -> JSON body (the remote-engine
 *     client sends it; parse(build(r)) gives r back).
 *
 * No sockets, no HTTP: bytes in, structs out. Ownership: a parsed
 * oai_request owns every string its engine_request points at; free it with
 * oai_request_free once the request is submitted (the engine copies). */
#ifndef TERN_OAI_REQUEST_H
#define TERN_OAI_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "oai_tools.h"

enum oai_kind {
    OAI_CHAT,       /* /v1/chat/completions: messages */
    OAI_COMPLETION  /* /v1/completions: prompt (string or token ids) */
};

/* Bounds applied while parsing (0 fields mean the defaults below). */
struct oai_limits {
    size_t max_body;        /* bytes; default 8 MiB (the HTTP layer's 413 comes first) */
    int32_t max_messages;   /* default 4096 */
    int32_t max_stop;       /* default 16 (OpenAI allows 4) */
    size_t max_stop_len;    /* bytes per stop string; default 256 */
    int32_t max_tokens_cap; /* largest max_tokens accepted; default 1 << 20 */
    int32_t max_prompt_ids; /* token-id prompts; default 1 << 20 */
};
#define OAI_DEFAULT_MAX_BODY (8u << 20)

struct oai_request {
    enum oai_kind kind;
    struct engine_request req;  /* sampling defaults are engine_sampling_default's */
    char *model;                /* "model" (required by OpenAI; NULL if absent) */
    char *user;                 /* "user" or NULL */
    bool stream;
    bool include_usage;         /* stream_options.include_usage */
    bool has_max_tokens;        /* max_tokens / max_completion_tokens given */
    bool has_seed;              /* "seed" given (else the caller may pick one) */
    int32_t logprobs;           /* chat top_logprobs / completions logprobs; -1 = not asked */
    bool echo;                  /* completions: the prompt goes before the reply */
    int32_t prompt_logprobs;    /* vLLM's prompt_logprobs; -1 = not asked */
    int32_t n_chars;            /* prompt text bytes (all message contents or the prompt) */
    /* Chat: tools, tool_choice, parallel_tool_calls (oai_tools.h). The tools
     * are already in the messages (system text) and a forced call's grammar
     * in req.json_schema; this says how to read the reply back. */
    struct oai_tools tools;
    /* storage behind req (owned) */
    struct engine_message *msgs;
    char **strs;                /* every owned string, freed together */
    int32_t n_strs, cap_strs;
    const char **stops;
    int32_t *ids;
};

/* Which field a failure was about (OpenAI's error "param"), or "" for the
 * body as a whole. */
struct oai_error {
    char message[512];
    char param[64];
};

/* Parses and validates body[0..len). Returns 0 and fills out (free it with
 * oai_request_free), or -1 with err filled (out needs no free then).
 * lim may be NULL (defaults). */
int oai_request_parse(const char *body, size_t len, enum oai_kind kind,
                      const struct oai_limits *lim, struct oai_request *out,
                      struct oai_error *err);
void oai_request_free(struct oai_request *r);

/* Builds the JSON body for r (messages for OAI_CHAT, prompt or prompt_tokens
 * for OAI_COMPLETION). model may be NULL ("default"). Every sampling field is
 * written, so the receiver applies exactly the sender's values. Returns a
 * malloc'd NUL-terminated string, NULL on out-of-memory or when r has no
 * prompt of the kind's shape. */
char *oai_request_build(enum oai_kind kind, const char *model, const struct engine_request *r,
                        bool stream, bool include_usage);

/* True when s[0..n) is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
bool oai_utf8_valid(const char *s, size_t n);

#endif
