/* scheduler: per-step batch building, admission, preemption. See scheduler.h. */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sched_init(struct sched *s, struct kv *kv, const struct sched_config *cfg, char *err,
               size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->kv = kv;
    if (cfg->step_tokens < 1 || cfg->max_running < 1 || cfg->max_logit_rows < cfg->max_running) {
        snprintf(err, errlen, "sched: invalid config (step_tokens %d, max_running %d, rows %d)",
                 cfg->step_tokens, cfg->max_running, cfg->max_logit_rows);
        return -1;
    }
    /* Decodes always run: a step may hold max_running decode tokens on top
     * of the prefill budget. */
    size_t nt = (size_t)sched_max_batch_tokens(cfg);
    size_t nr = (size_t)cfg->max_running + 1;
    struct sched_plan *p = &s->plan;
    p->token = malloc(nt * sizeof *p->token);
    p->pos = malloc(nt * sizeof *p->pos);
    p->seq = malloc(nt * sizeof *p->seq);
    p->want = malloc(nt);
    p->fseqs = malloc(nr * sizeof *p->fseqs);
    p->items = malloc(nr * sizeof *p->items);
    p->admitted = malloc(nr * sizeof *p->admitted);
    p->preempted = malloc(nr * sizeof *p->preempted);
    s->running = malloc(nr * sizeof *s->running);
    if (!p->token || !p->pos || !p->seq || !p->want || !p->fseqs || !p->items || !p->admitted ||
        !p->preempted || !s->running) {
        snprintf(err, errlen, "sched: out of memory for a %zu-token step", nt);
        sched_free(s);
        return -1;
    }
    return 0;
}

void sched_free(struct sched *s)
{
    struct sched_plan *p = &s->plan;
    free(p->token);
    free(p->pos);
    free(p->seq);
    free(p->want);
    free(p->fseqs);
    free(p->items);
    free(p->admitted);
    free(p->preempted);
    free(s->running);
    free(s->waiting);
    memset(s, 0, sizeof *s);
}

void sched_seq_init(struct sched_seq *q, uint64_t id, int priority)
{
    memset(q, 0, sizeof *q);
    q->id = id;
    q->priority = priority;
    kv_seq_init(&q->kv);
}

void sched_seq_free(struct sched_seq *q)
{
    free(q->tokens);
    free(q->kv.blocks);
    q->tokens = NULL;
    q->kv.blocks = NULL;
}

int sched_seq_push(struct sched_seq *q, int32_t token)
{
    if (q->n_tokens == q->cap) {
        int32_t cap = q->cap ? q->cap * 2 : 64;
        int32_t *nt = realloc(q->tokens, (size_t)cap * sizeof *nt);
        if (!nt) return -1;
        q->tokens = nt;
        q->cap = cap;
    }
    q->tokens[q->n_tokens++] = token;
    return 0;
}

/* ---- ordered lists ----------------------------------------------------------- */

static bool before(const struct sched_seq *a, const struct sched_seq *b)
{
    return a->priority != b->priority ? a->priority < b->priority : a->order < b->order;
}

static void list_insert(struct sched_seq **list, int32_t *n, struct sched_seq *q)
{
    int32_t i = *n;
    while (i > 0 && before(q, list[i - 1])) {
        list[i] = list[i - 1];
        i--;
    }
    list[i] = q;
    (*n)++;
}

static bool list_remove(struct sched_seq **list, int32_t *n, const struct sched_seq *q)
{
    for (int32_t i = 0; i < *n; i++) {
        if (list[i] != q) continue;
        memmove(list + i, list + i + 1, (size_t)(*n - i - 1) * sizeof *list);
        (*n)--;
        return true;
    }
    return false;
}

int sched_add(struct sched *s, struct sched_seq *q)
{
    /* Room for every sequence known, so that preemption never allocates. */
    int32_t need = s->n_waiting + s->n_running + 1;
    if (need > s->cap_waiting) {
        int32_t cap = s->cap_waiting ? s->cap_waiting : 64;
        while (cap < need) cap *= 2;
        struct sched_seq **nw = realloc(s->waiting, (size_t)cap * sizeof *nw);
        if (!nw) return -1;
        s->waiting = nw;
        s->cap_waiting = cap;
    }
    q->order = s->next_order++;
    list_insert(s->waiting, &s->n_waiting, q);
    q->state = SCHED_WAITING;
    return 0;
}

void sched_remove(struct sched *s, struct sched_seq *q)
{
    if (!list_remove(s->running, &s->n_running, q)) list_remove(s->waiting, &s->n_waiting, q);
    kv_seq_free(s->kv, &q->kv);
    q->n_computed = 0;
    q->state = SCHED_DONE;
}

/* ---- planning ---------------------------------------------------------------- */

/* Frees q's blocks and puts it back in the waiting queue at its arrival
 * place (ahead of later arrivals); it will be recomputed from its tokens.
 * The waiting list has room for every known sequence (sched_add). */
static void preempt(struct sched *s, struct sched_seq *q)
{
    list_remove(s->running, &s->n_running, q);
    kv_seq_free(s->kv, &q->kv);
    q->n_computed = 0;
    q->n_preempted++;
    s->preemptions++;
    s->plan.preempted[s->plan.n_preempted++] = q;
    list_insert(s->waiting, &s->n_waiting, q); /* room: see sched_add */
    q->state = SCHED_WAITING;
}

/* Lowest-priority, latest running sequence not yet in this step's batch. */
static struct sched_seq *victim(struct sched *s)
{
    for (int32_t i = s->n_running - 1; i >= 0; i--)
        if (s->running[i]->planned_step != s->step) return s->running[i];
    return NULL;
}

/* Logits rows an item [start, start+n) of q needs. */
static int32_t rows_for(const struct sched_seq *q, int32_t start, int32_t n, int32_t *first_pos)
{
    int32_t end = start + n;
    if (q->score && end <= q->n_prompt) {
        int32_t lo = start > q->score_from ? start : q->score_from;
        int32_t last = q->score_gen && end == q->n_tokens ? q->n_prompt : q->n_prompt - 1;
        int32_t hi = end < last ? end : last;
        *first_pos = lo;
        return hi > lo ? hi - lo : 0;
    }
    /* A decode with guesses: a row for its last token and for each guess. */
    *first_pos = end - 1 - q->n_draft;
    return end == q->n_tokens ? 1 + q->n_draft : 0;
}

/* Largest chunk of q within the token and row budgets (score sequences are
 * bounded by their logits rows). */
static int32_t chunk_for(const struct sched_seq *q, int32_t budget, int32_t rows_left)
{
    int32_t n = q->n_tokens - q->n_computed;
    if (n > budget) n = budget;
    int32_t fp;
    while (n > 0 && rows_for(q, q->n_computed, n, &fp) > rows_left) {
        int32_t r = rows_for(q, q->n_computed, n, &fp);
        n -= r - rows_left;
    }
    return n;
}

static void add_item(struct sched *s, struct sched_seq *q, int32_t n)
{
    struct sched_plan *p = &s->plan;
    int32_t si = p->n_items, fp;
    struct sched_item *it = &p->items[si];
    it->seq = q;
    it->start = q->n_computed;
    it->n = n;
    it->row0 = p->n_rows;
    it->n_rows = rows_for(q, it->start, n, &fp);
    it->first_row_pos = fp;
    it->n_draft = q->n_draft;
    p->fseqs[si].block_table = q->kv.blocks;
    p->fseqs[si].n_blocks = q->kv.n_blocks;
    for (int32_t i = 0; i < n; i++) {
        int32_t t = p->batch.n_tokens++, ps = it->start + i;
        p->token[t] = q->tokens[ps];
        p->pos[t] = ps;
        p->seq[t] = si;
        bool want = ps >= fp && ps < fp + it->n_rows;
        p->want[t] = want ? (q->embd ? FWD_WANT_EMBD : 1) : 0;
        p->n_embd += want && q->embd;
    }
    p->n_rows += it->n_rows;
    p->n_items++;
    q->planned_step = s->step;
}

/* Suffixes compared beyond this many tokens add nothing: the match is
 * already unambiguous, and it bounds the scan. */
#define SCHED_LOOKUP_MAX_MATCH 64

/* The earlier position i (< n - 1) whose tokens up to i match the longest
 * suffix of the sequence, the latest on ties; the match length in *len.
 * Longest rather than a fixed n-gram: in a rewrite, a short n-gram ("of
 * the") occurs in many places of the passage, and the latest of them is
 * often not the one being copied; the longest suffix match is. */
static int32_t lookup_longest(const int32_t *tokens, int32_t n, int32_t *len)
{
    int32_t best = -1, best_len = 0;
    if (n < 2) return -1;
    const int32_t last = tokens[n - 1];
    for (int32_t i = n - 2; i >= 0; i--) {
        if (tokens[i] != last) continue;
        int32_t l = 1;
        while (l < SCHED_LOOKUP_MAX_MATCH && l <= i && tokens[i - l] == tokens[n - 1 - l]) l++;
        if (l > best_len) {
            best_len = l;
            best = i;
            if (l == SCHED_LOOKUP_MAX_MATCH) break;
        }
    }
    *len = best_len;
    return best;
}

int32_t sched_lookup(const int32_t *tokens, int32_t n, int32_t k, int32_t *out)
{
    int32_t len, i = lookup_longest(tokens, n, &len);
    if (i < 0) return 0;
    int32_t c = 0;
    for (int32_t j = i + 1; j < n && c < k; j++) out[c++] = tokens[j];
    return c;
}

#define SCHED_MAX_LOOKUP 32

/* Guesses for decode q within the step's budgets: tokens left of the step
 * budget and logits rows left, after one token and one row for each of the
 * n_dec_left decodes still to plan (q included). Appends them to q's
 * tokens when their blocks fit without preempting anyone. */
static void plan_guesses(struct sched *s, struct sched_seq *q, int32_t n_dec_left)
{
    q->n_draft = 0;
    if (q->lookup_k <= 0 || q->score || q->embd) return;
    int32_t k = q->lookup_cur > 0 && q->lookup_cur < q->lookup_k ? q->lookup_cur : q->lookup_k;
    if (k > SCHED_MAX_LOOKUP) k = SCHED_MAX_LOOKUP;
    int32_t tok_left = s->cfg.step_tokens - s->plan.batch.n_tokens - n_dec_left;
    int32_t rows_left = s->cfg.max_logit_rows - s->plan.n_rows - n_dec_left;
    if (k > tok_left) k = tok_left;
    if (k > rows_left) k = rows_left;
    /* The sampled token after the last guess counts too. */
    if (q->n_limit > 0 && k > q->n_limit - q->n_tokens - 1) k = q->n_limit - q->n_tokens - 1;
    if (k <= 0) return;
    int32_t g[SCHED_MAX_LOOKUP];
    if (s->propose) {
        k = s->propose(s->propose_ud, q, k, g);
    } else {
        /* A continuation is trusted as far as the context that found it:
         * no more guesses than the match is long. A one-token match (a
         * common word) is right about a fifth of the time on an editing
         * reply, a match of four or more mostly; each guessed row costs a
         * share of the step (docs/PERFORMANCE.md §7). */
        int32_t len, at = lookup_longest(q->tokens, q->n_tokens, &len);
        if (k > len) k = len;
        int32_t c = 0;
        for (int32_t j = at + 1; at >= 0 && j < q->n_tokens && c < k; j++) g[c++] = q->tokens[j];
        k = c;
    }
    if (k <= 0) return;
    /* Guesses never take a block that a later decode of this step needs
     * (that would preempt someone for a guess). */
    int32_t need = kv_blocks_for(s->kv, (int64_t)q->n_tokens + k) - q->kv.n_blocks;
    if (need > 0 && kv_available(s->kv) - need < n_dec_left - 1) return;
    if (kv_seq_reserve(s->kv, &q->kv, (int64_t)q->n_tokens + k) != 0) return;
    for (int32_t i = 0; i < k && sched_seq_push(q, g[i]) == 0; i++) q->n_draft++;
}

/* Decodes (one pending token): each needs room for one more position;
 * when the pool is exhausted the lowest-priority, latest sequence goes. */
static void plan_decodes(struct sched *s)
{
    int32_t n_dec = 0;
    for (int32_t i = 0; i < s->n_running; i++)
        n_dec += s->running[i]->n_tokens - s->running[i]->n_computed == 1;
    for (int32_t i = 0; i < s->n_running; i++) {
        struct sched_seq *q = s->running[i];
        if (q->n_tokens - q->n_computed != 1) continue;
        plan_guesses(s, q, n_dec--);
        if (q->n_draft > 0) {
            add_item(s, q, 1 + q->n_draft);
            continue;
        }
        while (kv_seq_reserve(s->kv, &q->kv, q->n_tokens) != 0) {
            struct sched_seq *v = victim(s);
            if (!v) break;
            bool self = v == q;
            preempt(s, v);
            if (self) break;
        }
        if (q->state != SCHED_RUNNING) {
            i--; /* q left the running list */
            continue;
        }
        add_item(s, q, 1);
    }
}

/* Tries to admit the head q of the waiting queue. Returns true on success. */
static bool admit(struct sched *s, struct sched_seq *q)
{
    struct kv *kv = s->kv;
    /* Reuse whole cached blocks, but always compute the last known token:
     * its logits give the next token. */
    int32_t n_cached_blocks;
    /* A scored sequence needs the logits of every position from score_from
     * on, so the cache may only give what comes before it. */
    int32_t lim = q->score && q->score_from < q->n_tokens - 1 ? q->score_from : q->n_tokens - 1;
    int32_t reuse = kv_peek_match(kv, q->tokens, lim, &n_cached_blocks);
    int32_t need = kv_blocks_for(kv, q->n_tokens) - reuse / kv->block_tokens;
    /* Keep one block per running sequence free for their next decodes, so an
     * admission does not cause an immediate preemption. Matched blocks that
     * sit in the cached list stop being available once shared. */
    if (need + s->n_running > kv_available(kv) - n_cached_blocks) return false;
    int32_t got = kv_seq_match(kv, &q->kv, q->tokens, q->n_tokens, lim);
    if (got < 0 || kv_seq_reserve(kv, &q->kv, q->n_tokens) != 0) {
        kv_seq_free(kv, &q->kv);
        return false;
    }
    q->n_computed = got;
    q->n_cached = got < q->n_prompt ? got : q->n_prompt;
    list_remove(s->waiting, &s->n_waiting, q);
    list_insert(s->running, &s->n_running, q);
    q->state = SCHED_RUNNING;
    s->plan.admitted[s->plan.n_admitted++] = q;
    return true;
}

/* Makes room for an interactive request: preempts the latest running batch
 * sequence not yet in this step. Returns false when there is none. */
static bool displace_batch(struct sched *s, int prio)
{
    struct sched_seq *v = prio == 0 ? victim(s) : NULL;
    if (!v || v->priority == 0) return false;
    preempt(s, v);
    return true;
}

/* Admits waiting requests of class prio (FCFS) while they fit. Interactive
 * ones displace batch work. Returns how many were admitted. */
static int32_t admit_class(struct sched *s, int prio, int32_t max)
{
    int32_t n = 0;
    while (n < max && s->n_waiting > 0 && s->waiting[0]->priority == prio) {
        struct sched_seq *q = s->waiting[0];
        if (s->n_running >= s->cfg.max_running && !displace_batch(s, prio)) break;
        if (s->n_running >= s->cfg.max_running) continue;
        if (!admit(s, q)) {
            if (!displace_batch(s, prio)) break;
            continue;
        }
        n++;
    }
    return n;
}

/* Prefill chunks of running, unplanned sequences of class prio. */
static void plan_prefills(struct sched *s, int prio, int32_t *budget)
{
    struct sched_plan *p = &s->plan;
    for (int32_t i = 0; i < s->n_running && *budget > 0; i++) {
        struct sched_seq *q = s->running[i];
        if (q->priority != prio || q->planned_step == s->step) continue;
        int32_t n = chunk_for(q, *budget, s->cfg.max_logit_rows - p->n_rows);
        if (n <= 0) continue;
        add_item(s, q, n);
        *budget -= n;
        /* Not for a sequence whose limit leaves no room for a guess (the
         * first decode needs one guess and the token after it). */
        if (s->feed && s->propose && q->lookup_k > 0 && !q->score && !q->embd &&
            (q->n_limit <= 0 || q->n_limit >= q->n_prompt + 3))
            s->feed(s->propose_ud, q, q->n_computed, n);
    }
}

int32_t sched_max_batch_tokens(const struct sched_config *cfg)
{
    return cfg->step_tokens + cfg->max_running + SCHED_MIN_INTERACTIVE_CHUNK;
}

/* Order of a step: interactive admissions first (they may preempt batch
 * work, none of which is planned yet); then every decode, one token each;
 * then interactive prefill chunks, which get at least a minimum chunk even
 * when decodes used the whole budget, so a batch backlog delays an
 * interactive prompt by at most a step; then batch prefills and
 * admissions within what is left of the budget. */
int32_t sched_plan(struct sched *s)
{
    struct sched_plan *p = &s->plan;
    s->step++;
    p->batch.n_tokens = 0;
    p->n_items = p->n_rows = p->n_admitted = p->n_preempted = p->n_embd = 0;
    admit_class(s, 0, INT32_MAX);
    plan_decodes(s);
    int32_t budget = s->cfg.step_tokens - p->batch.n_tokens;
    int32_t ib0 = budget < SCHED_MIN_INTERACTIVE_CHUNK ? SCHED_MIN_INTERACTIVE_CHUNK : budget;
    int32_t ib = ib0;
    plan_prefills(s, 0, &ib);
    budget -= ib0 - ib;
    if (budget > 0) plan_prefills(s, 1, &budget);
    while (budget > 0 && admit_class(s, 1, 1) == 1) plan_prefills(s, 1, &budget);
    p->batch.token = p->token;
    p->batch.pos = p->pos;
    p->batch.seq = p->seq;
    p->batch.want_logits = p->want;
    p->batch.n_seqs = p->n_items;
    p->batch.seqs = p->fseqs;
    return p->batch.n_tokens;
}

void sched_commit(struct sched *s)
{
    struct sched_plan *p = &s->plan;
    for (int32_t i = 0; i < p->n_items; i++) {
        struct sched_item *it = &p->items[i];
        struct sched_seq *q = it->seq;
        if (q->state != SCHED_RUNNING) continue;
        q->n_computed = it->start + it->n - it->n_draft;
        kv_seq_commit(s->kv, &q->kv, q->tokens, q->n_computed);
    }
}

void sched_seq_accept(struct sched *s, struct sched_seq *q, int32_t n_accepted)
{
    if (n_accepted > q->n_draft) n_accepted = q->n_draft;
    if (n_accepted < 0) n_accepted = 0;
    s->spec_drafts++;
    s->spec_draft_tokens += (uint64_t)q->n_draft;
    s->spec_accepted += (uint64_t)n_accepted;
    /* Every guess costs a row of compute whether it is right or not: guess
     * about as many as were right last time, twice as many after a full run. */
    q->lookup_cur = n_accepted == q->n_draft ? 2 * q->n_draft : n_accepted + 1;
    q->n_tokens -= q->n_draft - n_accepted;
    q->n_computed += n_accepted;
    q->n_draft = 0;
    /* Keep room for the token sampled after the accepted guesses. */
    kv_seq_trim(s->kv, &q->kv, (int64_t)q->n_tokens + 1);
    kv_seq_commit(s->kv, &q->kv, q->tokens, q->n_computed);
}
