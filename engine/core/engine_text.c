/* engine_text: what happens to each sampled token on the engine thread:
 * sampling, UTF-8-safe detokenization, stop strings matched across token
 * boundaries (text that may begin a stop string is held back until it is
 * decided, and a matched stop string is never released), EOS/EOT and the
 * length limits. Also the per-position loss of scoring requests. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"
#include "perplexity.h"
#include "sampler.h"

int engine_sampler_init(struct engine_local *e, struct engine_req *r, char *err, size_t errlen)
{
    struct sampler_params p;
    sampler_params_default(&p);
    p.temperature = r->sp.temp;
    p.top_k = r->sp.top_k;
    p.top_p = r->sp.top_p;
    p.min_p = r->sp.min_p;
    p.repeat_penalty = r->sp.repeat_penalty;
    p.presence_penalty = r->sp.presence_penalty;
    p.frequency_penalty = r->sp.frequency_penalty;
    p.penalty_last_n = r->sp.penalty_last_n;
    p.seed = r->sp.seed;
    r->sampler = sampler_init(&p, e->n_vocab);
    if (!r->sampler) {
        snprintf(err, errlen, "engine: out of memory for a sampler (%d-token vocabulary)",
                 e->n_vocab);
        return -1;
    }
    /* The penalty window starts with the prompt, as the reference's does. */
    int32_t from = r->seq.n_tokens - p.penalty_last_n;
    for (int32_t i = from > 0 ? from : 0; i < r->seq.n_tokens; i++)
        sampler_accept(r->sampler, r->seq.tokens[i]);
    return 0;
}

void engine_sampler_free(struct engine_req *r)
{
    sampler_free(r->sampler);
    r->sampler = NULL;
}

int32_t engine_sample(struct engine_local *e, struct engine_req *r, float *logits)
{
    int32_t t = sampler_sample(r->sampler, logits, e->n_vocab);
    sampler_accept(r->sampler, t);
    return t;
}

double engine_nll(const float *logits, int32_t n_vocab, int32_t target)
{
    return -ppl_log_softmax(logits, n_vocab, target);
}

void engine_logprob_fill(const float *logits, int32_t n_vocab, int32_t target, int32_t n_top,
                         struct engine_logprob *out)
{
    int32_t tt[ENGINE_MAX_TOP_LOGPROBS];
    float tl[ENGINE_MAX_TOP_LOGPROBS];
    if (n_top > ENGINE_MAX_TOP_LOGPROBS) n_top = ENGINE_MAX_TOP_LOGPROBS;
    if (n_top > n_vocab) n_top = n_vocab;
    out->token = target;
    out->logprob = (float)ppl_token_logprobs(logits, n_vocab, target, n_top, tt, tl);
    out->rank = 1;
    for (int32_t i = 0; i < n_vocab; i++) out->rank += logits[i] > logits[target];
    out->n_top = n_top;
    for (int32_t i = 0; i < n_top; i++) {
        out->top[i].token = tt[i];
        out->top[i].logprob = tl[i];
    }
}

static int hold_append(struct engine_req *r, const char *s, size_t n)
{
    if (r->hold_len + n + 1 > r->hold_cap) {
        size_t cap = r->hold_cap ? r->hold_cap : 64;
        while (cap < r->hold_len + n + 1) cap *= 2;
        char *nh = realloc(r->hold, cap);
        if (!nh) return -1;
        r->hold = nh;
        r->hold_cap = cap;
    }
    memcpy(r->hold + r->hold_len, s, n);
    r->hold_len += n;
    r->hold[r->hold_len] = 0;
    return 0;
}

/* Removes and returns the first n held bytes. */
static char *hold_take(struct engine_req *r, size_t n)
{
    char *out = malloc(n + 1);
    if (!out) return NULL;
    memcpy(out, r->hold, n);
    out[n] = 0;
    memmove(r->hold, r->hold + n, r->hold_len - n + 1);
    r->hold_len -= n;
    return out;
}

/* Earliest complete stop string in the held text: its offset, or -1. */
static long find_stop(const struct engine_req *r)
{
    long best = -1;
    for (int32_t i = 0; i < r->n_stop; i++) {
        const char *p = strstr(r->hold, r->stop[i]);
        if (p && (best < 0 || p - r->hold < best)) best = p - r->hold;
    }
    return best;
}

/* Length of the longest held suffix that is a proper prefix of a stop string:
 * it must wait for the next token before it can be released. */
static size_t partial_stop(const struct engine_req *r)
{
    size_t keep = 0;
    for (int32_t i = 0; i < r->n_stop; i++) {
        size_t sl = strlen(r->stop[i]);
        for (size_t k = sl - 1 < r->hold_len ? sl - 1 : r->hold_len; k > keep; k--) {
            if (memcmp(r->hold + r->hold_len - k, r->stop[i], k) == 0) {
                keep = k;
                break;
            }
        }
    }
    return keep;
}

void engine_on_token(struct engine_local *e, struct engine_req *r, int32_t token, struct engine_out *o)
{
    memset(o, 0, sizeof *o);
    o->token = token;
    if (e->tok && tok_is_eog(e->tok, token) && !r->ignore_eos) {
        o->text = calloc(1, 1);
        o->finish = true;
        o->status = ENGINE_STOP;
        return;
    }
    char buf[512];
    size_t n = e->tok ? tok_stream_push(e->tok, &r->ts, token, buf, sizeof buf) : 0;
    if (hold_append(r, buf, n) != 0) {
        o->finish = true;
        o->status = ENGINE_ERROR;
        o->message = strdup("engine: out of memory for generated text");
        return;
    }
    long at = find_stop(r);
    if (at >= 0) {
        o->text = hold_take(r, (size_t)at);
        r->hold_len = 0; /* the stop string and anything after it are dropped */
        r->hold[0] = 0;
        o->finish = true;
        o->status = ENGINE_STOP;
        o->message = strdup("stop string");
        return;
    }
    o->text = hold_take(r, r->hold_len - partial_stop(r));
    int32_t gen = r->m.n_generated + 1; /* this token included */
    if ((r->max_tokens > 0 && gen >= r->max_tokens) || r->seq.n_tokens + 1 >= e->max_total) {
        o->finish = true;
        o->status = ENGINE_LENGTH;
    }
}

char *engine_flush_text(struct engine_local *e, struct engine_req *r)
{
    char buf[16];
    size_t n = e->tok ? tok_stream_flush(&r->ts, buf, sizeof buf) : 0;
    if (n) hold_append(r, buf, n);
    if (r->hold_len == 0) return NULL;
    return hold_take(r, r->hold_len);
}
