/* draft: a draft model's guesses for speculative decoding (draft.h). */
#include "draft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv.h"
#include "model.h"
#include "tok.h"

/* One sequence's draft state: the tokens whose K/V the draft holds. */
struct dseq {
    uint64_t id;                   /* 0 = free slot */
    struct kv_seq kv;
    int32_t *toks;
    int32_t n, cap;
    uint64_t used;                 /* proposal clock of its last use (LRU) */
};

struct draft {
    char *name;
    struct model *model;
    struct backend *be;
    struct backend_info binfo;
    struct kv kv;
    struct dseq *seqs;
    int32_t n_seqs;
    int32_t n_vocab, max_batch;
    /* one forward's buffers: up to max_batch tokens, one logits row */
    int32_t *tok, *pos, *seqi;
    uint8_t *want;
    float *logits;
    uint64_t clock, proposals, tokens;
    double seconds;
    /* the catch-up budget (draft.h): of step cur_step, step_fed tokens fed */
    int32_t catchup;
    uint64_t cur_step;
    int32_t step_fed, max_step_fed;
    uint64_t catchup_calls;
    uint64_t fed_prefill;          /* tokens fed beside the target's prefill chunks */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The draft's vocabulary must be the target's token for token: same size,
 * same bytes for every id (a draft of another tokenizer would guess ids
 * that mean other text, and nothing would ever be accepted). */
static int same_vocab(const struct tok *a, const struct tok *b, const char *name, char *err,
                      size_t errlen)
{
    int32_t n = tok_n_vocab(a);
    if (n != tok_n_vocab(b)) {
        snprintf(err, errlen, "draft model %s has %d tokens, the target %d: a draft needs the "
                 "target's vocabulary", name, tok_n_vocab(b), n);
        return -1;
    }
    char x[256], y[256];
    for (int32_t i = 0; i < n; i++) {
        size_t nx = tok_decode_token_special(a, i, x, sizeof x);
        size_t ny = tok_decode_token_special(b, i, y, sizeof y);
        if (nx != ny || memcmp(x, y, nx < sizeof x ? nx : sizeof x) != 0) {
            snprintf(err, errlen, "draft model %s: token %d differs from the target's: a draft "
                     "needs the target's vocabulary", name, i);
            return -1;
        }
    }
    return 0;
}

struct draft *draft_open(const struct draft_config *c, const struct tok *target_tok, char *err,
                         size_t errlen)
{
    struct draft *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "draft: out of memory");
        return NULL;
    }
    const char *slash = strrchr(c->model_path, '/');
    d->name = strdup(slash ? slash + 1 : c->model_path);
    d->n_seqs = c->max_seqs > 0 ? c->max_seqs : 8;
    d->seqs = calloc((size_t)d->n_seqs, sizeof *d->seqs);
    if (!d->name || !d->seqs) {
        snprintf(err, errlen, "draft: out of memory");
        goto fail;
    }
    char e2[512];
    d->model = model_open(c->model_path, e2, sizeof e2);
    if (!d->model) {
        snprintf(err, errlen, "draft model: %s", e2);
        goto fail;
    }
    struct tok *dt = tok_open(d->model->gguf, e2, sizeof e2);
    if (!dt) {
        snprintf(err, errlen, "draft model %s: %s", d->name, e2);
        goto fail;
    }
    int rc = same_vocab(target_tok, dt, d->name, err, errlen);
    tok_close(dt);
    if (rc != 0) goto fail;
    d->n_vocab = d->model->hp.n_vocab;
    d->catchup = c->catchup_tokens > 0 ? c->catchup_tokens : 64;
    d->cur_step = UINT64_MAX;
    /* A proposal feeds what the draft has not seen in chunks of this many
     * tokens (the whole prompt, at a sequence's first proposal). */
    d->max_batch = 256;
    struct backend_config bc = c->backend;
    bc.max_batch_tokens = d->max_batch;
    bc.max_seqs = 1;
    bc.kv_bytes = 0;               /* its default plan: one context, at most 16k tokens */
    bc.n_ctx = c->n_ctx;
    if (bc.kv_block_tokens <= 0) bc.kv_block_tokens = 16;
    d->be = backend_open(d->model, &bc, e2, sizeof e2);
    if (!d->be) {
        snprintf(err, errlen, "draft model %s: %s", d->name, e2);
        goto fail;
    }
    d->be->ops->get_info(d->be, &d->binfo);
    if (kv_init(&d->kv, d->be->kv_n_blocks, d->be->kv_block_tokens, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "draft model %s: %s", d->name, e2);
        goto fail;
    }
    d->tok = malloc((size_t)d->max_batch * sizeof *d->tok);
    d->pos = malloc((size_t)d->max_batch * sizeof *d->pos);
    d->seqi = calloc((size_t)d->max_batch, sizeof *d->seqi);
    d->want = malloc((size_t)d->max_batch);
    d->logits = malloc((size_t)d->n_vocab * sizeof *d->logits);
    if (!d->tok || !d->pos || !d->seqi || !d->want || !d->logits) {
        snprintf(err, errlen, "draft: out of memory");
        goto fail;
    }
    return d;
fail:
    draft_close(d);
    return NULL;
}

static void dseq_clear(struct draft *d, struct dseq *s)
{
    kv_seq_free(&d->kv, &s->kv);
    free(s->toks);
    memset(s, 0, sizeof *s);
}

void draft_close(struct draft *d)
{
    if (!d) return;
    if (d->seqs)
        for (int32_t i = 0; i < d->n_seqs; i++)
            if (d->seqs[i].id) dseq_clear(d, &d->seqs[i]);
    free(d->seqs);
    if (d->kv.blocks) kv_free(&d->kv);
    if (d->be) backend_close(d->be);
    if (d->model) model_close(d->model);
    free(d->tok);
    free(d->pos);
    free(d->seqi);
    free(d->want);
    free(d->logits);
    free(d->name);
    free(d);
}

/* The state of seq_id: its own slot, else a free one, else the least
 * recently used (whose blocks go back to the pool). */
static struct dseq *dseq_get(struct draft *d, uint64_t id)
{
    struct dseq *free_slot = NULL, *lru = NULL;
    for (int32_t i = 0; i < d->n_seqs; i++) {
        struct dseq *s = &d->seqs[i];
        if (s->id == id) return s;
        if (!s->id && !free_slot) free_slot = s;
        if (s->id && (!lru || s->used < lru->used)) lru = s;
    }
    struct dseq *s = free_slot ? free_slot : lru;
    if (s->id) dseq_clear(d, s);
    s->id = id;
    kv_seq_init(&s->kv);
    return s;
}

/* Room for n positions: blocks of other sequences are taken back, least
 * recently used first, before giving up. */
static int reserve(struct draft *d, struct dseq *s, int64_t n)
{
    while (kv_seq_reserve(&d->kv, &s->kv, n) != 0) {
        struct dseq *lru = NULL;
        for (int32_t i = 0; i < d->n_seqs; i++) {
            struct dseq *o = &d->seqs[i];
            if (o != s && o->id && o->kv.n_blocks > 0 && (!lru || o->used < lru->used)) lru = o;
        }
        if (!lru) return -1;
        dseq_clear(d, lru);
    }
    return 0;
}

static int push_tok(struct dseq *s, int32_t t)
{
    if (s->n == s->cap) {
        int32_t cap = s->cap ? 2 * s->cap : 256;
        int32_t *p = realloc(s->toks, (size_t)cap * sizeof *p);
        if (!p) return -1;
        s->toks = p;
        s->cap = cap;
    }
    s->toks[s->n++] = t;
    return 0;
}

/* Runs toks[0 .. n) at positions p0.. through the draft, the last one's
 * logits row wanted (unless no_logits); returns its greedy token (0 with
 * no_logits), or -1. */
static int32_t forward(struct draft *d, struct dseq *s, const int32_t *toks, int32_t n,
                       int32_t p0, int no_logits)
{
    if (reserve(d, s, (int64_t)p0 + n) != 0) return -1;
    struct fwd_seq fs = {.block_table = s->kv.blocks, .n_blocks = s->kv.n_blocks};
    int32_t done = 0;
    while (done < n) {
        int32_t m = n - done < d->max_batch ? n - done : d->max_batch;
        for (int32_t i = 0; i < m; i++) {
            d->tok[i] = toks[done + i];
            d->pos[i] = p0 + done + i;
            d->want[i] = !no_logits && done + i == n - 1;
        }
        struct fwd_batch b = {.n_tokens = m, .token = d->tok, .pos = d->pos, .seq = d->seqi,
                              .want_logits = d->want, .n_seqs = 1, .seqs = &fs};
        char err[256];
        if (backend_forward(d->be, &b, d->logits, err, sizeof err) != 0) return -1;
        done += m;
    }
    if (no_logits) return 0;
    /* Greedy: the first maximum, as the sampler's argmax takes it. */
    int32_t best = 0;
    for (int32_t v = 1; v < d->n_vocab; v++)
        if (d->logits[v] > d->logits[best]) best = v;
    return best;
}

static int32_t forward_last(struct draft *d, struct dseq *s, const int32_t *toks, int32_t n,
                            int32_t p0)
{
    return forward(d, s, toks, n, p0, 0);
}

/* What the draft holds of seq s that tokens[0 .. n) still has (guesses the
 * target rejected fall away), at most max; s is trimmed to it. */
static int32_t keep_common(struct draft *d, struct dseq *s, const int32_t *tokens, int32_t n,
                           int32_t max)
{
    int32_t c = 0;
    while (c < s->n && c < n && s->toks[c] == tokens[c]) c++;
    if (c > max) c = max;
    s->n = c;
    kv_seq_trim(&d->kv, &s->kv, c);
    return c;
}

static void step_begin(struct draft *d, uint64_t step)
{
    if (step != d->cur_step) {
        d->cur_step = step;
        d->step_fed = 0;
    }
}

void draft_feed(struct draft *d, uint64_t seq_id, const int32_t *tokens, int32_t n, int32_t chunk,
                uint64_t step)
{
    if (n <= 0) return;
    step_begin(d, step);
    double t0 = now_s();
    struct dseq *s = dseq_get(d, seq_id);
    s->used = ++d->clock;
    /* A recomputed chunk (the target's sequence was preempted) the draft
     * already holds, and what it holds beyond, stays: the next proposal
     * checks the rest against the whole sequence. */
    int32_t c = 0;
    while (c < s->n && c < n && s->toks[c] == tokens[c]) c++;
    if (c == n) {
        d->seconds += now_s() - t0;
        return;
    }
    c = keep_common(d, s, tokens, n, n);
    int32_t feed = n - c, left = d->catchup - d->step_fed;
    /* The target's chunk itself always goes in (the scheduler already
     * bounded it); a draft further behind (a prefix-cache hit) catches up
     * within what is left of the step's budget. */
    if (left < chunk) left = chunk;
    if (feed > left) feed = left;
    if (feed > 0 && forward(d, s, tokens + c, feed, c, 1) == 0) {
        for (int32_t i = c; i < c + feed; i++)
            if (push_tok(s, tokens[i]) != 0) break;
        d->step_fed += feed;
        d->fed_prefill += (uint64_t)feed;
        if (d->step_fed > d->max_step_fed) d->max_step_fed = d->step_fed;
    }
    d->seconds += now_s() - t0;
}

int32_t draft_propose(struct draft *d, uint64_t seq_id, const int32_t *tokens, int32_t n,
                      int32_t k, uint64_t step, int32_t *out)
{
    if (n <= 0 || k <= 0) return 0;
    step_begin(d, step);
    double t0 = now_s();
    struct dseq *s = dseq_get(d, seq_id);
    s->used = ++d->clock;
    /* At least the last token is fed again, for the logits row that
     * guesses the next. */
    int32_t c = keep_common(d, s, tokens, n, n - 1);
    int32_t g = 0, feed = n - c;
    if (feed > k + 1) {
        /* Catching up: within the step's budget; behind by more, feed what
         * the budget allows and guess nothing this step. */
        int32_t left = d->catchup - d->step_fed;
        if (feed > left) {
            if (left > 0 && forward_last(d, s, tokens + c, left, c) >= 0) {
                for (int32_t i = c; i < c + left; i++)
                    if (push_tok(s, tokens[i]) != 0) break;
                d->step_fed += left;
            }
            if (d->step_fed > d->max_step_fed) d->max_step_fed = d->step_fed;
            d->catchup_calls++;
            d->seconds += now_s() - t0;
            return 0;
        }
        d->step_fed += feed;
        if (d->step_fed > d->max_step_fed) d->max_step_fed = d->step_fed;
    }
    int32_t next = forward_last(d, s, tokens + c, feed, c);
    for (int32_t i = c; next >= 0 && i < n; i++)
        if (push_tok(s, tokens[i]) != 0) next = -1;
    while (next >= 0) {
        out[g++] = next;
        if (g == k) break;
        /* the guess goes in at the next position: the draft holds it */
        int32_t nn = forward_last(d, s, &next, 1, s->n);
        if (nn < 0 || push_tok(s, next) != 0) break;
        next = nn;
    }
    d->seconds += now_s() - t0;
    if (g > 0) {
        d->proposals++;
        d->tokens += (uint64_t)g;
    }
    return g;
}

void draft_forget(struct draft *d, uint64_t seq_id)
{
    for (int32_t i = 0; i < d->n_seqs; i++)
        if (d->seqs[i].id == seq_id) dseq_clear(d, &d->seqs[i]);
}

void draft_get_info(const struct draft *d, struct draft_info *out)
{
    memset(out, 0, sizeof *out);
    out->name = d->name;
    out->weight_bytes = d->binfo.weight_bytes;
    out->kv_bytes = d->binfo.kv_bytes;
    out->proposals = d->proposals;
    out->tokens = d->tokens;
    out->seconds = d->seconds;
    out->catchup_calls = d->catchup_calls;
    out->catchup_max_step = d->max_step_fed;
    out->fed_prefill = d->fed_prefill;
}
