/* oai_think: a reasoning model's thinking out of its reply. A reply that
 * begins (after whitespace) with <think> is split: the text up to </think>
 * is the reasoning (OpenAI-compatible servers' message.reasoning_content,
 * streamed as delta.reasoning_content), the rest the answer (content),
 * never mixed. Incremental: text arrives in any split (a tag across token
 * boundaries is held back until it is decided). No sockets. */
#ifndef TERN_OAI_THINK_H
#define TERN_OAI_THINK_H

#include <stdbool.h>
#include <stddef.h>

#include "sse.h"

struct oai_think {
    int state;          /* see oai_think.c */
    char hold[16];      /* bytes that may be part of a tag */
    size_t n_hold;
};
void oai_think_init(struct oai_think *t);
/* For a reply whose prompt opened the thinking (the template wrote <think>,
 * engine_info.chat_template_opens_think): it starts inside it; a <think>
 * the model writes again first is dropped. */
void oai_think_init_open(struct oai_think *t);
/* Splits s[0..n) into the reasoning and content buffers (appended). */
void oai_think_push(struct oai_think *t, const char *s, size_t n, struct sse_buf *reasoning,
                    struct sse_buf *content);
/* The end of the reply: what is held goes where it belongs. */
void oai_think_flush(struct oai_think *t, struct sse_buf *reasoning, struct sse_buf *content);

/* Rewrites a built chat response so message.reasoning_content = reasoning
 * and message.content = content. malloc'd JSON, NULL on error. */
char *oai_think_response(const char *response_json, const char *reasoning, const char *content);
/* Rewrites a built chunk so its delta carries reasoning_content instead of
 * content. */
char *oai_think_chunk(const char *chunk_json, const char *reasoning);

#endif
