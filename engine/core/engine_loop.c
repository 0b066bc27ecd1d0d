/* engine_loop: the engine thread, started and stopped by engine_local.c. Each
 * iteration takes new requests from the inbox, ends cancelled, timed-out and
 * stalled ones (freeing their blocks before the step), plans a batch, runs
 * it on the backend without the lock held, then samples and publishes
 * events. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "draft.h"
#include "engine_impl.h"

/* ---- finishing (lock held, engine thread) --------------------------------------- */

static void live_unlink(struct engine_local *e, struct engine_req *r)
{
    if (r->live_prev) r->live_prev->live_next = r->live_next;
    else if (e->live == r) e->live = r->live_next;
    if (r->live_next) r->live_next->live_prev = r->live_prev;
    r->live_prev = r->live_next = NULL;
}

static void emit_text(struct engine_local *e, struct engine_req *r, char *text, double t)
{
    struct engine_event ev = {.type = ENGINE_EV_TOKEN, .t = t, .token = -1, .text = text};
    engine_emit(e, r, &ev);
}

/* Ends r: frees its blocks, releases held text, sends FINISHED. */
static void finish(struct engine_local *e, struct engine_req *r, enum engine_status st, const char *msg)
{
    double now = engine_now(e);
    if (st != ENGINE_ERROR && r->seq.state != SCHED_NEW) engine_cache_record(e, r);
    if (r->seq.state != SCHED_NEW) sched_remove(&e->sched, &r->seq);
    if (e->draft) draft_forget(e->draft, r->seq.id);
    r->seq.state = SCHED_DONE;
    if (r->counted_queued) {
        r->counted_queued = false;
        e->n_queued--;
    }
    char *rest = engine_flush_text(e, r);
    if (rest && st != ENGINE_CANCELLED && st != ENGINE_CONSUMER_STALLED) emit_text(e, r, rest, now);
    else free(rest);
    r->m.status = st;
    r->m.t_finished = now;
    r->m.n_preempted = r->seq.n_preempted;
    metrics_finalize(&r->m);
    metrics_add_request(&e->mx, &r->m);
    e->mx.prompt_tokens += (uint64_t)r->m.n_prompt;
    e->mx.cached_tokens += (uint64_t)r->m.n_cached;
    e->mx.generated_tokens += (uint64_t)r->m.n_generated;

    struct engine_event ev = {.type = ENGINE_EV_FINISHED, .t = now, .token = -1, .status = st};
    ev.metrics = malloc(sizeof *ev.metrics);
    if (ev.metrics) {
        *ev.metrics = r->m;
        ev.metrics->token_t = NULL;
        if (r->m.n_generated > 0) {
            ev.metrics->token_t = malloc((size_t)r->m.n_generated * sizeof(double));
            if (ev.metrics->token_t)
                memcpy(ev.metrics->token_t, r->m.token_t, (size_t)r->m.n_generated * sizeof(double));
            else ev.metrics->n_generated = 0;
        }
    }
    if (msg) ev.message = strdup(msg);
    if (r->embd_out) { /* so does an embedding */
        ev.embedding = r->embd_out;
        ev.n_embedding = r->embd_dims;
        r->embd_out = NULL;
    }
    if (r->plp) { /* the prompt's entries move into the event */
        ev.logprobs = r->plp;
        ev.n_logprobs = r->seq.n_prompt;
        r->plp = NULL;
    }
    engine_emit(e, r, &ev);

    if (e->trace.f) {
        char args[160];
        snprintf(args, sizeof args, "\"status\":\"%s\",\"prompt\":%d,\"cached\":%d,\"generated\":%d",
                 engine_status_name(st), r->m.n_prompt, r->m.n_cached, r->m.n_generated);
        if (r->m.t_first_token > 0)
            trace_span(&e->trace, r->id, "decode", r->m.t_first_token, now, args, r->trace_tags);
        else trace_span(&e->trace, r->id, "end", now, now, args, r->trace_tags);
    }
    r->finished = true;
    live_unlink(e, r);
    engine_req_unref(r);
}

/* ---- per-iteration housekeeping (lock held) ------------------------------------- */

static void intake(struct engine_local *e)
{
    while (e->inbox_head) {
        struct engine_req *r = e->inbox_head;
        e->inbox_head = r->inbox_next;
        if (!e->inbox_head) e->inbox_tail = NULL;
        r->inbox_next = NULL;
        e->n_inbox--;
        if (e->trace.f) {
            char name[200];
            snprintf(name, sizeof name, "req %llu (%s)%s%s", (unsigned long long)r->id,
                     r->prio == ENGINE_PRIO_BATCH ? "batch" : "interactive",
                     r->trace_id ? " " : "", r->trace_id ? r->trace_id : "");
            trace_track(&e->trace, r->id, name);
        }
        if (sched_add(&e->sched, &r->seq) != 0) finish(e, r, ENGINE_ERROR, "engine: out of memory");
    }
}

/* Cancellations, stalled consumers and queue timeouts end before the step. */
static void sweep(struct engine_local *e, double now)
{
    struct engine_req *r = e->live, *next;
    for (; r; r = next) {
        next = r->live_next;
        if (r->seq.state == SCHED_NEW) continue; /* still in the inbox */
        if (r->cancel) finish(e, r, ENGINE_CANCELLED, NULL);
        else if (r->stalled)
            finish(e, r, ENGINE_CONSUMER_STALLED, "events not drained: consumer stalled");
        else if (r->oom) finish(e, r, ENGINE_ERROR, "engine: out of memory for events");
        else if (r->deadline > 0 && !r->admitted_once && now > r->deadline)
            finish(e, r, ENGINE_TIMEOUT, "queue timeout");
    }
}

static void publish_seq(struct engine_local *e, const struct sched_seq *q, bool running)
{
    const struct engine_req *r = q->ud;
    struct engine_req_info *o = &e->pub_reqs[e->n_pub_reqs++];
    o->id = r->id;
    o->tag = r->tag;
    o->priority = r->prio;
    o->running = running;
    o->n_prompt = q->n_prompt;
    o->n_cached = q->n_cached;
    o->n_computed = q->n_computed;
    o->n_generated = r->m.n_generated;
    o->kv_blocks = q->kv.n_blocks;
    o->n_preempted = q->n_preempted;
    o->t_arrival = r->m.t_arrival;
}

/* Live requests for engine_requests (lock held). */
static void publish_reqs(struct engine_local *e)
{
    int32_t n = e->sched.n_running + e->sched.n_waiting;
    if (n > e->cap_pub_reqs) {
        int32_t cap = e->cap_pub_reqs ? e->cap_pub_reqs : 64;
        while (cap < n) cap *= 2;
        struct engine_req_info *np = realloc(e->pub_reqs, (size_t)cap * sizeof *np);
        if (!np) return; /* keep the previous list */
        e->pub_reqs = np;
        e->cap_pub_reqs = cap;
    }
    e->n_pub_reqs = 0;
    for (int32_t i = 0; i < e->sched.n_running; i++) publish_seq(e, e->sched.running[i], true);
    for (int32_t i = 0; i < e->sched.n_waiting; i++) publish_seq(e, e->sched.waiting[i], false);
}

static void publish(struct engine_local *e)
{
    publish_reqs(e);
    engine_cache_publish(e);
    struct engine_stats *s = &e->stats;
    s->kv_block_tokens = e->kv.block_tokens;
    s->kv_total = e->kv.n_blocks;
    s->kv_used = e->kv.n_used;
    s->kv_cached = e->kv.n_cached;
    s->kv_free = e->kv.n_free;
    s->prefix_query_tokens = e->kv.query_tokens;
    s->prefix_hit_tokens = e->kv.hit_tokens;
    s->prefix_hit_rate = e->kv.query_tokens ? (double)e->kv.hit_tokens / (double)e->kv.query_tokens : 0;
    s->evictions = e->kv.evictions;
    s->running = e->sched.n_running;
    s->waiting = e->sched.n_waiting;
    e->mx.preemptions = e->sched.preemptions;
    s->spec_drafts = e->sched.spec_drafts;
    s->spec_draft_tokens = e->sched.spec_draft_tokens;
    s->spec_accepted_tokens = e->sched.spec_accepted;
    if (e->draft) {
        struct draft_info di;
        draft_get_info(e->draft, &di);
        s->draft_s = di.seconds;
        s->draft_catchup = di.catchup_calls;
        s->draft_catchup_max = di.catchup_max_step;
        s->draft_fed_prefill = di.fed_prefill;
    }
    s->step_tokens_budget = e->sched.cfg.step_tokens;
    s->max_running = e->sched.cfg.max_running;
    s->max_queue = e->cfg.max_queue;
    s->n_ctx = e->n_ctx;
    s->backend = e->binfo;
}

/* ---- one step ------------------------------------------------------------------- */

void engine_out_free(struct engine_out *o)
{
    for (int32_t j = 0; j < o->n_more; j++) engine_out_free(&o->more[j]);
    free(o->more);
    free(o->text);
    free(o->message);
    free(o->lp);
    memset(o, 0, sizeof *o);
}

/* A decode with guesses: samples its rows in order, exactly as plain
 * decoding would one step at a time (the sampler, stop strings, grammar and
 * limits see the same tokens, counts and lengths), and stops at the first
 * row whose sampled token differs from the guess at that position, or at
 * the end of the request. A guess is accepted when the token sampled at its
 * position equals it: with a greedy sampler that is plain decoding's token;
 * with temperature the guess is a deterministic proposal and the draw is
 * the target's own, so the output keeps the target's distribution. Then the
 * scheduler keeps the accepted guesses' K/V and drops the rest. */
static void verify_guesses(struct engine_local *e, struct engine_req *r, struct sched_item *it,
                           float *row, struct engine_out *o)
{
    struct sched_seq *q = &r->seq;
    int32_t d = it->n_draft, base = q->n_tokens - d, g0 = r->m.n_generated, a = 0;
    size_t nv = (size_t)e->n_vocab;
    o->n_draft = d;
    o->more = calloc((size_t)d, sizeof *o->more);
    struct engine_out *cur = o;
    for (int32_t j = 0;; j++) {
        q->n_tokens = base + j; /* as plain decoding would have it at this row */
        r->m.n_generated = g0 + j;
        engine_req_sample_row(e, r, row + (size_t)j * nv, cur);
        if (cur->finish || j == d || !o->more || cur->token != q->tokens[base + j]) break;
        a++;
        cur = &o->more[o->n_more++];
    }
    r->m.n_generated = g0;
    q->n_tokens = base + d;
    o->n_accepted = a;
    sched_seq_accept(&e->sched, q, a);
}

/* Samples or scores the rows of each item (no lock: engine-thread data only).
 * A scored item's rows are the prompt positions first, then (a generating
 * request with prompt_logprobs, at the prompt's end) the sampling row. */
static void process_rows(struct engine_local *e, struct engine_out *outs)
{
    struct sched_plan *p = &e->sched.plan;
    for (int32_t i = 0; i < p->n_items; i++) {
        struct sched_item *it = &p->items[i];
        struct engine_req *r = it->seq->ud;
        struct engine_out *o = &outs[i];
        memset(o, 0, sizeof *o);
        float *row = e->logits + (size_t)it->row0 * (size_t)e->n_vocab;
        size_t nv = (size_t)e->n_vocab;
        int32_t k = 0;
        if (r->embed) {
            for (; k < it->n_rows; k++)
                engine_req_embed_row(e, r, row + (size_t)k * nv, it->first_row_pos + k);
            continue;
        }
        for (; r->seq.score && k < it->n_rows && it->first_row_pos + k < r->seq.n_prompt - 1; k++)
            engine_req_score_row(e, r, row + (size_t)k * nv, it->first_row_pos + k, o);
        if (r->score) continue;
        if (it->n_draft > 0) {
            verify_guesses(e, r, it, row, o);
            continue;
        }
        if (k == it->n_rows - 1 && it->start + it->n == r->seq.n_tokens)
            engine_req_sample_row(e, r, row + (size_t)k * nv, o);
    }
}

static int push_token_time(struct engine_req *r, double t)
{
    if (r->m.n_generated == r->token_cap) {
        int32_t cap = r->token_cap ? r->token_cap * 2 : 64;
        double *nt = realloc(r->m.token_t, (size_t)cap * sizeof *nt);
        if (!nt) return -1;
        r->m.token_t = nt;
        r->token_cap = cap;
    }
    r->m.token_t[r->m.n_generated] = t;
    return 0;
}

/* Admission and preemption events of this step (lock held). */
static void report_moves(struct engine_local *e, double t0)
{
    struct sched_plan *p = &e->sched.plan;
    for (int32_t i = 0; i < p->n_preempted; i++) {
        struct engine_req *r = p->preempted[i]->ud;
        struct engine_event ev = {.type = ENGINE_EV_PREEMPTED, .t = t0, .token = -1};
        engine_emit(e, r, &ev);
    }
    for (int32_t i = 0; i < p->n_admitted; i++) {
        struct engine_req *r = p->admitted[i]->ud;
        if (!r->admitted_once) {
            r->admitted_once = true;
            r->m.t_admitted = t0;
            if (r->counted_queued) {
                r->counted_queued = false;
                e->n_queued--;
            }
            trace_span(&e->trace, r->id, "queue", r->m.t_arrival, t0, NULL, r->trace_tags);
        }
        r->m.n_cached = r->seq.n_cached;
        r->m.n_computed = r->seq.n_prompt - r->seq.n_cached;
        struct engine_event ev = {.type = ENGINE_EV_ADMITTED, .t = t0, .token = -1,
                                  .done = r->seq.n_cached, .total = r->seq.n_prompt};
        engine_emit(e, r, &ev);
    }
}

static bool apply_token(struct engine_local *e, struct engine_req *r, struct engine_out *o,
                        double t1, bool in_seq);

/* Events and state changes of one item after the forward pass (lock held). */
static void apply_item(struct engine_local *e, struct sched_item *it, struct engine_out *o,
                       double t0, double t1)
{
    struct engine_req *r = it->seq->ud;
    if (r->m.t_first_sched == 0) r->m.t_first_sched = t0;
    if (it->start < r->seq.n_prompt) {
        int32_t done = r->seq.n_computed < r->seq.n_prompt ? r->seq.n_computed : r->seq.n_prompt;
        struct engine_event ev = {.type = ENGINE_EV_PREFILL, .t = t1, .token = -1, .done = done,
                                  .total = r->seq.n_prompt};
        engine_emit(e, r, &ev);
        if (e->trace.f) {
            char args[64];
            snprintf(args, sizeof args, "\"tokens\":%d,\"start\":%d", it->n, it->start);
            trace_span(&e->trace, r->id, "prefill", t0, t1, args, r->trace_tags);
        }
        if (!r->prefill_done && r->seq.n_computed >= r->seq.n_prompt) {
            r->prefill_done = true;
            r->m.t_prefill_done = t1;
            /* The prompt's rows are in: a recomputation after a preemption
             * needs only the sampling row again. */
            if (!r->score) r->seq.score = false;
        }
    }
    if (r->embed) {
        if (r->seq.n_computed < r->seq.n_prompt) return;
        float *v = engine_req_embedding(e, r);
        if (!v) {
            finish(e, r, ENGINE_ERROR, "engine: out of memory for an embedding");
            return;
        }
        r->embd_out = v;
        finish(e, r, ENGINE_OK, NULL);
        return;
    }
    if (r->score) {
        r->m.nll_sum += o->nll;
        r->m.nll_sq_sum += o->nll_sq;
        r->m.n_scored += o->n_scored;
        if (r->seq.n_computed >= r->seq.n_prompt) finish(e, r, ENGINE_OK, NULL);
        return;
    }
    if (!o->sampled) return;
    if (o->n_draft > 0) {
        r->m.n_spec_steps++;
        r->m.spec_from_draft = e->draft != NULL;
        r->m.n_draft_tokens += o->n_draft;
        r->m.n_accepted_tokens += o->n_accepted;
        if (e->trace.f) {
            char args[64];
            snprintf(args, sizeof args, "\"guessed\":%d,\"accepted\":%d", o->n_draft,
                     o->n_accepted);
            trace_span(&e->trace, r->id, "lookup", t0, t1, args, r->trace_tags);
        }
    }
    /* The run of tokens: this one, then those after accepted guesses. */
    struct engine_out *more = o->more;
    int32_t n_more = o->n_more, n_acc = o->n_accepted;
    o->more = NULL;
    o->n_more = 0;
    for (int32_t j = 0; j <= n_more; j++) {
        struct engine_out *cur = j == 0 ? o : &more[j - 1];
        if (apply_token(e, r, cur, t1, j < n_acc)) {
            for (int32_t m = j; m < n_more; m++) engine_out_free(&more[m]);
            break;
        }
    }
    free(more);
}

/* One sampled token of r: its events; true when r finished. in_seq: an
 * accepted guess, already in the sequence's tokens. */
static bool apply_token(struct engine_local *e, struct engine_req *r, struct engine_out *o,
                        double t1, bool in_seq)
{
    if (push_token_time(r, t1) != 0 || (!in_seq && sched_seq_push(&r->seq, o->token) != 0)) {
        free(o->text);
        free(o->message);
        free(o->lp);
        finish(e, r, ENGINE_ERROR, "engine: out of memory for generated tokens");
        return true;
    }
    r->m.n_generated++;
    if (r->m.n_generated == 1) {
        r->m.t_first_token = t1;
        struct engine_event fe = {.type = ENGINE_EV_FIRST_TOKEN, .t = t1, .token = o->token};
        engine_emit(e, r, &fe);
    }
    struct engine_event ev = {.type = ENGINE_EV_TOKEN, .t = t1, .token = o->token, .text = o->text,
                              .logprobs = o->lp, .n_logprobs = o->lp ? 1 : 0};
    if (!ev.text) ev.text = calloc(1, 1);
    engine_emit(e, r, &ev);
    bool fin = o->finish;
    if (fin) finish(e, r, o->status, o->message);
    free(o->message);
    return fin;
}

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Plans and runs one step; returns the number of tokens run (0: idle). */
static int32_t step(struct engine_local *e)
{
    double c0 = thread_cpu();
    double t0 = engine_now(e);
    struct draft_info d0;
    if (e->draft) draft_get_info(e->draft, &d0);
    int32_t n = sched_plan(&e->sched);
    struct sched_plan *p = &e->sched.plan;
    if (e->draft && e->trace.f) {
        /* the draft model's passes run inside the plan, before the step's batch */
        struct draft_info d1;
        draft_get_info(e->draft, &d1);
        if (d1.seconds > d0.seconds) {
            char args[64];
            snprintf(args, sizeof args, "\"guessed\":%llu",
                     (unsigned long long)(d1.tokens - d0.tokens));
            trace_span(&e->trace, 0, "draft", t0, t0 + (d1.seconds - d0.seconds), args, NULL);
        }
    }
    if (n == 0) {
        if (p->n_preempted || p->n_admitted) {
            pthread_mutex_lock(&e->mu);
            report_moves(e, t0);
            pthread_mutex_unlock(&e->mu);
        }
        return 0;
    }
    char err[256] = "";
    double cb0 = thread_cpu(), tb0 = engine_now(e);
    int rc = backend_forward(e->be, &p->batch, e->logits, err, sizeof err);
    double tb1 = engine_now(e), cb1 = thread_cpu();
    struct engine_out outs_stack[64], *outs = outs_stack;
    if (p->n_items > 64) outs = malloc((size_t)p->n_items * sizeof *outs);
    if (rc == 0) {
        sched_commit(&e->sched);
        if (outs) process_rows(e, outs);
    }
    double t1 = engine_now(e);
    pthread_mutex_lock(&e->mu);
    report_moves(e, t0);
    for (int32_t i = 0; i < p->n_items; i++) {
        struct engine_req *r = p->items[i].seq->ud;
        if (r->finished) {
            if (outs) engine_out_free(&outs[i]);
            continue;
        }
        if (rc != 0) finish(e, r, ENGINE_ERROR, err);
        else if (!outs) finish(e, r, ENGINE_ERROR, "engine: out of memory");
        else apply_item(e, &p->items[i], &outs[i], t0, t1);
    }
    double t2 = engine_now(e);
    metrics_add_step(&e->mx, t2 - t0, tb1 - tb0, n, thread_cpu() - c0, cb1 - cb0);
    publish(e);
    pthread_mutex_unlock(&e->mu);
    if (outs != outs_stack) free(outs);
    if (e->trace.f) {
        char args[96];
        snprintf(args, sizeof args, "\"tokens\":%d,\"seqs\":%d,\"backend_ms\":%.3f", n,
                 p->n_items, (tb1 - tb0) * 1e3);
        trace_span(&e->trace, 0, "step", t0, t2, args, NULL);
    }
    return n;
}

/* Waits on work_cond (mu held) for at most ns nanoseconds. */
static void nap(struct engine_local *e, long ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ns;
    while (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&e->work_cond, &e->mu, &ts);
}

static void *engine_main(void *arg)
{
    struct engine_local *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        intake(e);
        sweep(e, engine_now(e));
        if (e->stop) break;
        if (e->kvd_save_req) { /* engine_cache_save */
            pthread_mutex_unlock(&e->mu);
            char err[256] = "";
            int rc = engine_cache_save_now(e, err, sizeof err);
            pthread_mutex_lock(&e->mu);
            e->kvd_save_rc = rc;
            snprintf(e->kvd_save_err, sizeof e->kvd_save_err, "%s", err);
            e->kvd_save_req = false;
            pthread_cond_broadcast(&e->ev_cond);
        }
        publish(e);
        if (e->sched.n_running == 0 && e->sched.n_waiting == 0) {
            pthread_cond_wait(&e->work_cond, &e->mu);
            continue;
        }
        if (e->paused) {
            /* Held: wake every 10 ms so queue timeouts still fire. */
            nap(e, 10000000);
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        engine_cache_restore(e);
        int32_t n = step(e);
        pthread_mutex_lock(&e->mu);
        if (n == 0 && !e->stop && !e->inbox_head) {
            /* Nothing runnable (e.g. waiting for a cancellation): nap briefly. */
            nap(e, 2000000);
        }
    }
    /* Closing: everything still known ends cancelled. */
    intake(e);
    while (e->live) finish(e, e->live, ENGINE_CANCELLED, "engine closing");
    publish(e);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ---- start / stop --------------------------------------------------------------- */

int engine_thread_start(struct engine_local *e, char *err, size_t errlen)
{
    publish(e); /* statistics are readable before the first step */
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        snprintf(err, errlen, "engine: cannot start the engine thread");
        return -1;
    }
    e->thread_started = true;
    return 0;
}

void engine_thread_stop(struct engine_local *e)
{
    if (!e->thread_started) return;
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    pthread_cond_broadcast(&e->work_cond);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
}
