/* engine_request: a request's life in the local engine.
 *  - Submission, in the caller's thread: the prompt is rendered and
 *    tokenized here, so that a request that can never run (too large for the
 *    context or the KV pool, queue full, malformed) is refused at once with
 *    the numbers, before the engine thread sees it.
 *  - Its events and its memory: each queued event holds a reference.
 *  - Each token, on the engine thread: sampling, log-probabilities,
 *    UTF-8-safe detokenization, stop strings matched across token boundaries
 *    (text that may begin a stop string is held back until it is decided,
 *    and a matched stop string is never released), EOS/EOT and the length
 *    limits; the per-position loss of scoring requests.
 * The engine thread (engine_loop.c) and engine_local.c call down into this
 * file; it calls neither. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"
#include "growbuf.h"
#include "perplexity.h"
#include "sampler.h"

/* ---- its memory and its events -------------------------------------------------- */

/* A request lives while the engine holds it or any of its events is queued. */
void engine_req_unref(struct engine_req *r)
{
    if (--r->refs > 0) return;
    sched_seq_free(&r->seq);
    for (int32_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->hold);
    free(r->trace_id);
    free(r->trace_tags);
    free(r->m.token_t);
    free(r->plp);
    free(r->embd_sum);
    free(r->embd_out);
    sampler_free(r->sampler);
    tmask_free(r->gmask);
    jsg_free(r->grammar);
    free(r);
}

/* Queues an event of r (lock held); flags a consumer that fell behind. */
void engine_emit(struct engine_local *e, struct engine_req *r, struct engine_event *ev)
{
    ev->id = r->id;
    ev->tag = r->tag;
    if (evq_push(&e->evq, ev, r) != 0) {
        r->oom = true;
        return;
    }
    r->refs++;
    r->n_events++;
    if (r->n_events > e->cfg.event_limit && ev->type != ENGINE_EV_FINISHED) r->stalled = true;
    pthread_cond_broadcast(&e->ev_cond);
}

/* ---- submission (caller's thread) ----------------------------------------------- */

char *engine_render_chat(const struct engine_local *e, const struct engine_message *msgs, int32_t n,
                         char *err, size_t errlen)
{
    if (!e->has_tmpl) {
        snprintf(err, errlen, "engine: no chat template (no tokenizer): give a raw prompt");
        return NULL;
    }
    struct tmpl_msg *tm = malloc((size_t)(n > 0 ? n : 1) * sizeof *tm);
    if (!tm) {
        snprintf(err, errlen, "engine: out of memory rendering %d messages", n);
        return NULL;
    }
    for (int32_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            snprintf(err, errlen, "engine: message %d has no %s", i,
                     msgs[i].role ? "content" : "role");
            free(tm);
            return NULL;
        }
        tm[i].role = msgs[i].role;
        tm[i].content = msgs[i].content;
    }
    char *out = NULL;
    int rc = tmpl_apply(&e->tmpl, tm, (size_t)n, true, &out, err, errlen);
    free(tm);
    return rc == 0 ? out : NULL;
}

/* Encodes text into r's token list. */
static int encode_into(struct engine_local *e, struct engine_req *r, const char *text, unsigned flags,
                       char *err, size_t errlen)
{
    if (!e->tok) {
        snprintf(err, errlen, "engine: no tokenizer: give prompt_tokens");
        return -1;
    }
    size_t len = strlen(text);
    int64_t n = tok_encode(e->tok, text, len, flags, NULL, 0, err, errlen);
    if (n < 0) return -1;
    if (n > INT32_MAX / 2) {
        snprintf(err, errlen, "engine: prompt of %lld tokens is too long", (long long)n);
        return -1;
    }
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) {
        snprintf(err, errlen, "engine: out of memory for %lld prompt tokens", (long long)n);
        return -1;
    }
    int64_t m = tok_encode(e->tok, text, len, flags, ids, n, err, errlen);
    int rc = 0;
    for (int64_t i = 0; i < m && rc == 0; i++) rc = sched_seq_push(&r->seq, ids[i]);
    free(ids);
    if (m < 0) return -1;
    if (rc != 0) snprintf(err, errlen, "engine: out of memory for %lld prompt tokens", (long long)m);
    return rc;
}

static int build_prompt(struct engine_local *e, struct engine_req *r, const struct engine_request *q,
                        char *err, size_t errlen)
{
    int sources = (q->n_messages > 0 && q->messages) + (q->prompt != NULL) +
                  (q->n_prompt_tokens > 0 && q->prompt_tokens);
    if (sources != 1) {
        snprintf(err, errlen, "engine: a request needs exactly one of messages, prompt or "
                              "prompt_tokens (got %d)", sources);
        return -1;
    }
    if (q->n_prompt_tokens > 0) {
        for (int32_t i = 0; i < q->n_prompt_tokens; i++) {
            if (q->prompt_tokens[i] < 0 || q->prompt_tokens[i] >= e->n_vocab) {
                snprintf(err, errlen, "engine: prompt token %d at index %d is outside the "
                                      "vocabulary (%d)", q->prompt_tokens[i], i, e->n_vocab);
                return -1;
            }
            if (sched_seq_push(&r->seq, q->prompt_tokens[i]) != 0) {
                snprintf(err, errlen, "engine: out of memory for the prompt");
                return -1;
            }
        }
        return 0;
    }
    if (q->prompt) return encode_into(e, r, q->prompt, TOK_ADD_BOS | TOK_PARSE_SPECIAL, err, errlen);
    char *text = engine_render_chat(e, q->messages, q->n_messages, err, errlen);
    if (!text) return -1;
    int rc = encode_into(e, r, text, ENGINE_CHAT_TOK_FLAGS, err, errlen);
    free(text);
    /* the empty thinking block goes after the opened turn, parsed as the
     * template's own text is (its tags are special tokens where the model has
     * them); a template that opened the thinking itself (DeepSeek-R1) gets
     * only the close, as llama.cpp's R1 template with enable_thinking does */
    const char *empty = e->has_tmpl && e->tmpl.think_open ? "</think>" : "<think>\n\n</think>\n\n";
    if (rc == 0 && q->no_think) rc = encode_into(e, r, empty, TOK_PARSE_SPECIAL, err, errlen);
    return rc;
}

/* Refuses a request that can never fit, with the numbers. */
static int check_size(const struct engine_local *e, const struct engine_request *q, int32_t n_prompt,
                      char *err, size_t errlen)
{
    bool no_gen = q->score || q->embed;
    int64_t want = (int64_t)n_prompt + (no_gen ? 0 : (q->max_tokens > 0 ? q->max_tokens : 1));
    if (n_prompt == 0) {
        snprintf(err, errlen, "engine: empty prompt");
        return -1;
    }
    if (want <= e->max_total) return 0;
    snprintf(err, errlen,
             "request too large: prompt %d + max_tokens %d = %lld tokens, but a sequence can "
             "hold at most %d (context %d, KV cache %d blocks x %d = %d tokens)",
             n_prompt, no_gen ? 0 : q->max_tokens, (long long)want, e->max_total, e->n_ctx,
             e->kv.n_blocks, e->kv.block_tokens, e->kv.n_blocks * e->kv.block_tokens);
    return 1;
}

static int copy_stops(struct engine_req *r, const struct engine_request *q)
{
    if (q->n_stop <= 0 || !q->stop) return 0;
    r->stop = calloc((size_t)q->n_stop, sizeof *r->stop);
    if (!r->stop) return -1;
    for (int32_t i = 0; i < q->n_stop; i++) {
        if (!q->stop[i] || !q->stop[i][0]) continue; /* an empty stop string never matches */
        r->stop[r->n_stop] = strdup(q->stop[i]);
        if (!r->stop[r->n_stop++]) return -1;
    }
    return 0;
}

static int32_t top_n(int32_t n)
{
    return n < 0 ? 0 : n > ENGINE_MAX_TOP_LOGPROBS ? ENGINE_MAX_TOP_LOGPROBS : n;
}

static struct engine_req *req_new(const struct engine_request *q)
{
    struct engine_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    sched_seq_init(&r->seq, 0, q->priority == ENGINE_PRIO_BATCH ? 1 : 0);
    r->seq.ud = r;
    r->tag = q->tag;
    r->prio = q->priority == ENGINE_PRIO_BATCH ? ENGINE_PRIO_BATCH : ENGINE_PRIO_INTERACTIVE;
    r->sp = q->sampling;
    r->max_tokens = q->max_tokens > 0 ? q->max_tokens : 0;
    r->ignore_eos = q->ignore_eos;
    r->score = q->score;
    r->score_from = q->score_from > 0 ? q->score_from : 0;
    r->want_lp = q->logprobs && !q->score;
    r->top_lp = top_n(q->top_logprobs);
    r->refs = 1;
    tok_stream_init(&r->ts);
    return r;
}

/* One entry per prompt token, NAN until its position is computed. */
static int init_prompt_lp(struct engine_req *r, const struct engine_request *q)
{
    r->plp = calloc((size_t)r->seq.n_prompt, sizeof *r->plp);
    if (!r->plp) return -1;
    for (int32_t i = 0; i < r->seq.n_prompt; i++) {
        r->plp[i].token = r->seq.tokens[i];
        r->plp[i].logprob = NAN;
    }
    r->plp_top = top_n(q->prompt_top_logprobs);
    return 0;
}

static int sampler_start(const struct engine_local *e, struct engine_req *r, char *err, size_t errlen)
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

/* Structured output: the schema is compiled here, so a bad one is refused
 * at once; the token trie is the engine thread's, built at the first row. */
static int grammar_start(const struct engine_local *e, struct engine_req *r,
                         const struct engine_request *q, char *err, size_t errlen)
{
    if (!q->json_schema && !q->json_object) return 0;
    if (!e->tok) {
        snprintf(err, errlen, "engine: structured output needs the model's tokenizer");
        return -1;
    }
    char msg[320];
    r->grammar = jsg_compile(q->json_schema, q->json_schema ? strlen(q->json_schema) : 0,
                             q->json_object && !q->json_schema, msg, sizeof msg);
    if (!r->grammar) {
        snprintf(err, errlen, "json_schema: %s", msg);
        return -1;
    }
    return 0;
}

/* Embeddings: checks the request against what the engine can do and sets
 * the rows its pooling needs (every position but for last-token pooling,
 * asked as scored rows from 0 so that no cached prefix skips them). */
static int embed_start(const struct engine_local *e, struct engine_req *r,
                       const struct engine_request *q, char *err, size_t errlen)
{
    if (e->embd_why[0]) {
        snprintf(err, errlen, "embeddings: %s", e->embd_why);
        return -1;
    }
    if (q->n_messages > 0) {
        snprintf(err, errlen, "embeddings: give the input as a prompt or prompt tokens, not "
                              "chat messages");
        return -1;
    }
    if (q->dimensions < 0 || q->dimensions > e->n_embd) {
        snprintf(err, errlen, "embeddings: dimensions %d is outside 1..%d (the model's "
                              "embedding size)", q->dimensions, e->n_embd);
        return -1;
    }
    if ((unsigned)q->pooling > ENGINE_POOL_LAST) {
        snprintf(err, errlen, "embeddings: unknown pooling %d", (int)q->pooling);
        return -1;
    }
    r->embed = true;
    r->want_lp = false;
    r->pool = q->pooling == ENGINE_POOL_MODEL ? e->pooling : q->pooling;
    r->embd_dims = q->dimensions > 0 ? q->dimensions : e->n_embd;
    r->embd_sum = calloc((size_t)e->n_embd, sizeof *r->embd_sum);
    if (!r->embd_sum) {
        snprintf(err, errlen, "embeddings: out of memory for a %d-wide vector", e->n_embd);
        return -1;
    }
    r->seq.embd = true;
    r->seq.score = r->pool != ENGINE_POOL_LAST;
    r->seq.score_from = 0;
    r->seq.score_gen = true;
    return 0;
}

/* Frees a request that never entered the engine. */
static void req_drop(struct engine_req *r)
{
    r->refs = 1;
    engine_req_unref(r);
}

uint64_t engine_local_submit(struct engine *base, const struct engine_request *q,
                             enum engine_status *why, char *err, size_t errlen)
{
    struct engine_local *e = engine_local_of(base);
    enum engine_status dummy;
    if (!why) why = &dummy;
    *why = ENGINE_ERROR;
    double now = engine_now(e);
    struct engine_req *r = req_new(q);
    if (!r) {
        snprintf(err, errlen, "engine: out of memory for a request");
        return 0;
    }
    if (build_prompt(e, r, q, err, errlen) != 0) goto fail;
    int sz = check_size(e, q, r->seq.n_tokens, err, errlen);
    if (sz != 0) {
        if (sz > 0) *why = ENGINE_REJECTED;
        goto fail;
    }
    if (copy_stops(r, q) != 0) {
        snprintf(err, errlen, "engine: out of memory for stop strings");
        goto fail;
    }
    if (e->cfg.trace_path) {   /* only a traced engine keeps them */
        r->trace_tags = trace_tags_new(q->trace_request_id, q->trace_tenant);
        if (q->trace_request_id && q->trace_request_id[0])
            r->trace_id = strndup(q->trace_request_id, 128);
    }
    r->seq.n_prompt = r->seq.n_tokens;
    if (q->embed) {
        if (embed_start(e, r, q, err, errlen) != 0) goto fail;
    } else if (q->prompt_logprobs && init_prompt_lp(r, q) != 0) {
        snprintf(err, errlen, "engine: out of memory for %d prompt log-probabilities",
                 r->seq.n_prompt);
        goto fail;
    }
    if (!r->embed) {
        r->seq.score = r->score || q->prompt_logprobs;
        r->seq.score_gen = !r->score;
        if (!r->score && r->score_from > r->seq.n_prompt - 1) r->score_from = r->seq.n_prompt - 1;
        r->seq.score_from = r->score_from;
        if (!r->score && sampler_start(e, r, err, errlen) != 0) goto fail;
        if (!r->score && grammar_start(e, r, q, err, errlen) != 0) goto fail;
        int32_t k = q->lookup_k != 0 ? q->lookup_k : e->cfg.lookup_k;
        r->seq.lookup_k = r->score || k < 0 ? 0 : k;
        int64_t lim = r->max_tokens > 0 ? (int64_t)r->seq.n_prompt + r->max_tokens : e->max_total;
        r->seq.n_limit = (int32_t)(lim < e->max_total ? lim : e->max_total);
    }
    r->m.t_arrival = now;
    r->m.n_prompt = r->seq.n_prompt;
    r->m.priority = r->prio;
    r->deadline = q->queue_timeout_s > 0 ? now + q->queue_timeout_s : 0;

    pthread_mutex_lock(&e->mu);
    if (e->stop || e->n_queued >= e->cfg.max_queue) {
        int32_t nq = e->n_queued;
        bool closing = e->stop;
        pthread_mutex_unlock(&e->mu);
        *why = closing ? ENGINE_ERROR : ENGINE_REJECTED;
        if (closing) snprintf(err, errlen, "engine: closing");
        else snprintf(err, errlen, "queue full: %d requests waiting (max-queue %d)", nq,
                      e->cfg.max_queue);
        goto fail;
    }
    r->id = r->m.id = ++e->next_id;
    r->seq.id = r->id;
    r->m.tag = r->tag;
    r->counted_queued = true;
    e->n_queued++;
    e->mx.submitted++;
    r->live_next = e->live;
    if (e->live) e->live->live_prev = r;
    e->live = r;
    if (e->inbox_tail) e->inbox_tail->inbox_next = r;
    else e->inbox_head = r;
    e->inbox_tail = r;
    e->n_inbox++;
    struct engine_event ev = {.type = ENGINE_EV_QUEUED, .t = now, .token = -1,
                              .total = r->seq.n_prompt};
    engine_emit(e, r, &ev);
    pthread_cond_broadcast(&e->work_cond);
    uint64_t id = r->id;
    pthread_mutex_unlock(&e->mu);
    return id;
fail:
    req_drop(r);
    return 0;
}

/* ---- each token (engine thread) ------------------------------------------------- */

static int32_t sample_token(struct engine_local *e, struct engine_req *r, float *logits,
                            const uint32_t *allow)
{
    int32_t t = allow ? sampler_sample_masked(r->sampler, logits, e->n_vocab, allow)
                      : sampler_sample(r->sampler, logits, e->n_vocab);
    sampler_accept(r->sampler, t);
    return t;
}

/* -log p(target) from one row of logits. */
static double row_nll(const float *logits, int32_t n_vocab, int32_t target)
{
    return -ppl_log_softmax(logits, n_vocab, target);
}

/* Fills out with target's log p and the n_top most likely tokens of one row. */
static void logprob_fill(const float *logits, int32_t n_vocab, int32_t target, int32_t n_top,
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
    if (growbuf_reserve(&r->hold, &r->hold_cap, r->hold_len + n + 1, 64)) return -1;
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

/* Detokenizes token, matches stop strings, applies the limits (o was zeroed). */
static void on_token(struct engine_local *e, struct engine_req *r, int32_t token,
                     struct engine_out *o)
{
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

void engine_req_score_row(struct engine_local *e, struct engine_req *r, const float *row,
                          int32_t pos, struct engine_out *o)
{
    int32_t next = r->seq.tokens[pos + 1];
    double v = 0.0;
    if (r->plp) {
        logprob_fill(row, e->n_vocab, next, r->plp_top, &r->plp[pos + 1]);
        if (r->score) v = -(double)r->plp[pos + 1].logprob;
    } else {
        v = row_nll(row, e->n_vocab, next);
    }
    o->nll += v;
    o->nll_sq += v * v;
    o->n_scored++;
}

/* With logprobs, the row is kept as it came (the sampler rewrites it) for
 * the token's entry. */
/* Ends r at this row with an error (a token slot is still used: the caller
 * treats every finish as coming with a sampled token). */
static void fail_row(struct engine_local *e, struct engine_req *r, const char *msg,
                     struct engine_out *o)
{
    o->sampled = true;
    o->token = e->tok ? tok_eos(e->tok) : 0;
    if (o->token < 0) o->token = 0;
    o->text = calloc(1, 1);
    o->finish = true;
    o->status = ENGINE_ERROR;
    o->message = strdup(msg);
    (void)r;
}

/* Structured output: the tokens the grammar allows at this row (the
 * sampler draws among them only). NULL (o filled) when it cannot go on. */
static const uint32_t *grammar_mask(struct engine_local *e, struct engine_req *r,
                                    struct engine_out *o)
{
    char err[160] = "";
    if (!e->gvocab) e->gvocab = tmask_vocab_new(e->tok, err, sizeof err);
    if (e->gvocab && !r->gmask) r->gmask = tmask_new(r->grammar, e->gvocab);
    if (!e->gvocab || !r->gmask) {
        fail_row(e, r, err[0] ? err : "grammar: out of memory", o);
        return NULL;
    }
    int32_t n_allowed = 0;
    const uint32_t *allow = tmask_compute(r->gmask, &n_allowed);
    if (!allow || n_allowed == 0) {
        fail_row(e, r, allow ? "grammar: no token of the vocabulary can continue the JSON"
                             : "grammar: out of memory", o);
        return NULL;
    }
    return allow;
}

/* After a token under a grammar: advance it, and end the request when only
 * end-of-generation tokens could follow (saves the step that would sample
 * one). */
static void grammar_advance(struct engine_local *e, struct engine_req *r, int32_t t,
                            struct engine_out *o)
{
    if (tmask_accept(r->gmask, t) != 0) {
        if (!o->finish) {
            o->finish = true;
            o->status = ENGINE_ERROR;
            o->message = strdup("grammar: the sampled token does not continue the JSON");
        }
        return;
    }
    if (o->finish || !tmask_complete(r->gmask)) return;
    int32_t n_allowed = 0;
    const uint32_t *allow = tmask_compute(r->gmask, &n_allowed);
    if (allow && n_allowed <= tmask_n_eog(e->gvocab)) {
        o->finish = true;
        o->status = ENGINE_STOP;
    }
}

void engine_req_sample_row(struct engine_local *e, struct engine_req *r, float *row,
                           struct engine_out *o)
{
    if (r->want_lp && !e->lp_row) e->lp_row = malloc((size_t)e->n_vocab * sizeof *e->lp_row);
    bool lp = r->want_lp && e->lp_row;
    if (lp) memcpy(e->lp_row, row, (size_t)e->n_vocab * sizeof *row);
    const uint32_t *allow = r->grammar ? grammar_mask(e, r, o) : NULL;
    if (r->grammar && !allow) return;
    int32_t t = sample_token(e, r, row, allow);
    if (lp && (o->lp = malloc(sizeof *o->lp)) != NULL)
        logprob_fill(e->lp_row, e->n_vocab, t, r->top_lp, o->lp);
    on_token(e, r, t, o);
    if (r->grammar) grammar_advance(e, r, t, o);
    o->sampled = true;
}

char *engine_flush_text(struct engine_local *e, struct engine_req *r)
{
    char buf[16];
    size_t n = e->tok ? tok_stream_flush(&r->ts, buf, sizeof buf) : 0;
    if (n) hold_append(r, buf, n);
    if (r->hold_len == 0) return NULL;
    return hold_take(r, r->hold_len);
}
