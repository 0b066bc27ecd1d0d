/* oai_logprobs: log-probabilities in the OpenAI wire shapes, both ways.
 *
 *   oai_logprobs_chat_json        chat: {"content": [{token, logprob, bytes,
 *                                 top_logprobs: [{token, logprob, bytes}]}], "refusal": null}
 *   oai_logprobs_completion_json  completions: {"tokens", "token_logprobs",
 *                                 "top_logprobs": [{text: logprob}], "text_offset"}
 *                                 (echo: the prompt's entries first, the first one null)
 *   oai_prompt_logprobs_json      vLLM's prompt_logprobs: [null, {"ID": {logprob, rank,
 *                                 decoded_token}}, ...]
 *   oai_prompt_logprobs_parse     the client side: each prompt token's log p from a
 *                                 completions response (prompt_logprobs, else echo's
 *                                 token_logprobs)
 *
 * Token text comes from a callback (the engine's token bytes). A token whose
 * bytes are not valid UTF-8 alone (part of a character) is written as
 * "bytes:\xNN..." (vLLM's convention); chat entries carry the raw "bytes". */
#ifndef TERN_OAI_LOGPROBS_H
#define TERN_OAI_LOGPROBS_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

struct cJSON;

/* Writes token id's bytes to out[0..cap); returns the length or -1. */
typedef int (*oai_token_bytes_fn)(void *ud, int32_t id, char *out, size_t cap);

struct oai_lp_list {
    const struct engine_logprob *lp;
    int32_t n;
    int32_t n_top;               /* alternatives to write per entry (<= each entry's n_top) */
    oai_token_bytes_fn bytes;
    void *ud;
};

/* Each returns a new cJSON the caller owns, NULL on out-of-memory. */
struct cJSON *oai_logprobs_chat_json(const struct oai_lp_list *l);
/* prompt: the echoed prompt's entries (may be NULL); gen: the generated
 * ones (may be NULL); *text_offset: the byte offset of the first token in
 * the returned text, advanced past the written tokens (streams go on from it). */
struct cJSON *oai_logprobs_completion_json(const struct oai_lp_list *prompt,
                                           const struct oai_lp_list *gen, int64_t *text_offset);
struct cJSON *oai_prompt_logprobs_json(const struct oai_lp_list *prompt);

/* Reads choices[0] of a completions response json[0..len): out[i] = log p
 * of prompt token ids[i] (NAN for i = 0 and where the server sent null).
 * From "prompt_logprobs" (vLLM: the entry keyed by ids[i]) or else from
 * "logprobs.token_logprobs" (echo: the first n values). Returns 0, or -1
 * with err (not JSON, neither field, fewer entries than the prompt). */
int oai_prompt_logprobs_parse(const char *json, size_t len, const int32_t *ids, int32_t n,
                              double *out, char *err, size_t errlen);

#endif
