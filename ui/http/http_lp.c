/* http_lp: a request's log-probabilities between the engine's events and
 * the OpenAI JSON (see http_lp.h). */
#include "http_lp.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oai_logprobs.h"
#include "oai_request.h"

struct http_lp {
    struct engine *e;
    enum oai_kind kind;
    int32_t n_top;                /* logprobs asked: alternatives per token; -1 none */
    int32_t echo_top;             /* completions echo with logprobs; -1 none */
    int32_t prompt_top;           /* vLLM prompt_logprobs; -1 none */
    char *echo;                   /* the prompt text (echo), NULL otherwise */
    struct engine_logprob *gen;   /* [n_gen] generated tokens' entries */
    int32_t n_gen, cap_gen, n_sent;
    int64_t text_offset;          /* streams: offset of the next token in the text */
};

static int token_bytes(void *ud, int32_t id, char *out, size_t cap)
{
    return engine_token_bytes(ud, id, out, cap);
}

/* The prompt as text: as given, or its token ids decoded. */
static char *prompt_text(struct engine *e, const struct engine_request *r)
{
    if (r->prompt) return strdup(r->prompt);
    size_t cap = (size_t)r->n_prompt_tokens * 16 + 1, n = 0;
    char *s = malloc(cap);
    for (int32_t i = 0; s && i < r->n_prompt_tokens; i++) {
        char b[256];
        int k = engine_token_bytes(e, r->prompt_tokens[i], b, sizeof b);
        if (k <= 0) continue;
        if (n + (size_t)k + 1 > cap) {
            char *t = realloc(s, cap = (cap + (size_t)k) * 2);
            if (!t) {
                free(s);
                return NULL;
            }
            s = t;
        }
        memcpy(s + n, b, (size_t)k);
        n += (size_t)k;
    }
    if (s) s[n] = 0;
    return s;
}

struct http_lp *http_lp_new(struct engine *e, const struct oai_request *q, char *err,
                            size_t errlen)
{
    err[0] = 0;
    if (q->logprobs < 0 && !q->echo && q->prompt_logprobs < 0) return NULL;
    if (q->stream && q->prompt_logprobs >= 0) {
        snprintf(err, errlen, "'prompt_logprobs' is served without streaming only");
        return NULL;
    }
    if (q->stream && q->echo && q->logprobs >= 0) {
        snprintf(err, errlen, "'echo' with 'logprobs' is served without streaming only");
        return NULL;
    }
    struct http_lp *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->e = e;
    l->kind = q->kind;
    l->n_top = q->logprobs;
    l->echo_top = q->echo ? q->logprobs : -1;
    l->prompt_top = q->prompt_logprobs;
    if (q->echo && !(l->echo = prompt_text(e, &q->req))) {
        free(l);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->text_offset = l->echo ? (int64_t)strlen(l->echo) : 0;
    return l;
}

void http_lp_free(struct http_lp *l)
{
    if (!l) return;
    free(l->echo);
    free(l->gen);
    free(l);
}

void http_lp_token(struct http_lp *l, const struct engine_event *ev)
{
    if (!l || l->n_top < 0 || !ev->logprobs || ev->n_logprobs < 1) return;
    if (l->n_gen == l->cap_gen) {
        int32_t cap = l->cap_gen ? l->cap_gen * 2 : 64;
        struct engine_logprob *g = realloc(l->gen, (size_t)cap * sizeof *g);
        if (!g) return;
        l->gen = g;
        l->cap_gen = cap;
    }
    l->gen[l->n_gen++] = ev->logprobs[0];
}

static struct oai_lp_list list(struct http_lp *l, const struct engine_logprob *lp, int32_t n,
                               int32_t n_top)
{
    return (struct oai_lp_list){lp, n, n_top, token_bytes, l->e};
}

cJSON *http_lp_chunk(struct http_lp *l)
{
    if (!l || l->n_top < 0 || l->n_sent == l->n_gen) return NULL;
    struct oai_lp_list g = list(l, l->gen + l->n_sent, l->n_gen - l->n_sent, l->n_top);
    l->n_sent = l->n_gen;
    return l->kind == OAI_CHAT ? oai_logprobs_chat_json(&g)
                               : oai_logprobs_completion_json(NULL, &g, &l->text_offset);
}

const char *http_lp_echo(const struct http_lp *l)
{
    return l && l->echo ? l->echo : "";
}

char *http_lp_response(struct http_lp *l, const struct oai_resp_ctx *c, const char *text,
                       const struct engine_event *fin)
{
    cJSON *lp = NULL, *plp = NULL;
    struct oai_lp_list g = list(l, l->gen, l->n_gen, l->n_top);
    struct oai_lp_list p = list(l, fin->logprobs, fin->logprobs ? fin->n_logprobs : 0,
                                l->echo_top > l->prompt_top ? l->echo_top : l->prompt_top);
    int64_t off = 0;
    if (l->n_top >= 0)
        lp = l->kind == OAI_CHAT ? oai_logprobs_chat_json(&g)
                                 : oai_logprobs_completion_json(l->echo_top >= 0 ? &p : NULL,
                                                                &g, &off);
    if (l->prompt_top >= 0) {
        p.n_top = l->prompt_top;
        plp = oai_prompt_logprobs_json(&p);
    }
    const char *echo = http_lp_echo(l);
    size_t ne = strlen(echo), nt = strlen(text);
    char *whole = malloc(ne + nt + 1);
    char *out = NULL;
    if (whole) {
        memcpy(whole, echo, ne);
        memcpy(whole + ne, text, nt + 1);
        out = oai_response_build_lp(c, whole, fin->metrics, lp, plp);
        lp = plp = NULL;
    }
    cJSON_Delete(lp);
    cJSON_Delete(plp);
    free(whole);
    return out;
}
