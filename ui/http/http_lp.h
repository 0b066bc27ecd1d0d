/* http_lp: the log-probabilities of one completion request on tern serve
 * (chat logprobs/top_logprobs, completions logprobs + echo, vLLM's
 * prompt_logprobs): the generated tokens' entries gathered from TOKEN
 * events, the prompt's from the FINISHED event, written in the OpenAI
 * shapes by engine/wire/oai_logprobs. NULL when the request asked for none
 * of them. */
#ifndef TERN_HTTP_LP_H
#define TERN_HTTP_LP_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "oai_response.h"

struct cJSON;
struct http_lp;

/* NULL with *err set when the request cannot be served as asked (a 400),
 * NULL with err "" when it asked for nothing (no state needed). */
struct http_lp *http_lp_new(struct engine *e, const struct oai_request *q, char *err,
                            size_t errlen);
void http_lp_free(struct http_lp *l);
/* A TOKEN event's entry (copied). */
void http_lp_token(struct http_lp *l, const struct engine_event *ev);
/* Streams: the "logprobs" of the entries not yet sent (NULL: none asked). */
struct cJSON *http_lp_chunk(struct http_lp *l);
/* The prompt text a completions echo puts first ("" when none). */
const char *http_lp_echo(const struct http_lp *l);
/* The whole response (not streamed): text after the echo, logprobs and
 * prompt_logprobs from fin (the FINISHED event). */
char *http_lp_response(struct http_lp *l, const struct oai_resp_ctx *c, const char *text,
                       const struct engine_event *fin);

#endif
