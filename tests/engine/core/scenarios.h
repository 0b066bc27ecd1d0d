/* scenarios: the serving-core checks of issue 5, written once and run both
 * on the deterministic fake backend (test_engine_fake) and on the real
 * default model (test_engine_real). A fixture says how to open an engine
 * and where prompt tokens come from. */
#ifndef TERN_SCENARIOS_H
#define TERN_SCENARIOS_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "engine.h"
#include "tap.h"

struct fx {
    const char *name;
    /* Opens an engine with cfg (parts/model filled in by the fixture);
     * kv_blocks > 0 sizes the KV pool to that many blocks. */
    struct engine *(*open)(struct fx *fx, struct engine_config *cfg, int32_t kv_blocks);
    void (*close)(struct fx *fx, struct engine *e);
    const int32_t *text;         /* token pool prompts are sliced from */
    int32_t n_text;
    int32_t gen;                 /* tokens to generate in comparisons */
    int32_t bi_len_step;         /* batch invariance prompts: 9 + bi_len_step * i tokens */
    double timeout_s;            /* per scenario */
    void *ud;
};

struct res {
    uint64_t id;
    int32_t *tok;
    int32_t n_tok, cap;
    bool done;
    enum engine_status st;
    struct engine_metrics m;     /* owns m.token_t */
    char *msg;
    int32_t n_ev[ENGINE_EV_FINISHED + 1];
    int32_t last_prefill_done;
    bool order_ok;               /* QUEUED first, FINISHED last, times monotonic */
    double last_t;
    int32_t seen_tokens_at_cancel;
};

static double fx_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void res_free(struct res *r, int n)
{
    for (int i = 0; i < n; i++) {
        free(r[i].tok);
        free(r[i].m.token_t);
        free(r[i].msg);
    }
    memset(r, 0, sizeof *r * (size_t)n);
}

static void res_event(struct res *r, struct engine_event *ev)
{
    if (r->n_ev[ENGINE_EV_QUEUED] == 0 && ev->type != ENGINE_EV_QUEUED) r->order_ok = false;
    if (r->done || ev->t + 1e-9 < r->last_t) r->order_ok = false;
    r->last_t = ev->t;
    r->n_ev[ev->type]++;
    if (ev->type == ENGINE_EV_PREFILL) r->last_prefill_done = ev->done;
    if (ev->type == ENGINE_EV_TOKEN && ev->token >= 0) {
        if (r->n_tok == r->cap) {
            r->cap = r->cap ? r->cap * 2 : 64;
            r->tok = realloc(r->tok, (size_t)r->cap * sizeof *r->tok);
        }
        r->tok[r->n_tok++] = ev->token;
    }
    if (ev->type == ENGINE_EV_FINISHED) {
        r->done = true;
        r->st = ev->status;
        if (ev->metrics) {
            r->m = *ev->metrics;
            ev->metrics->token_t = NULL;
        }
        r->msg = ev->message;
        ev->message = NULL;
    }
}

/* Drains events into res (matched by id) until every res is done or the
 * timeout passes. skip: an id whose events are never read (stall test). */
static bool collect(struct engine *e, struct res *rs, int n, double timeout_s, uint64_t skip)
{
    double until = fx_now() + timeout_s;
    struct engine_event evs[64];
    for (;;) {
        bool all = true;
        for (int i = 0; i < n; i++)
            if (!rs[i].done && rs[i].id != skip) all = false;
        if (all) return true;
        if (fx_now() > until) return false;
        int got = 0;
        if (skip) {
            for (int i = 0; i < n && got == 0; i++)
                if (rs[i].id != skip && !rs[i].done)
                    got = engine_poll_request(e, rs[i].id, evs, 64);
            if (got == 0) {
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
            }
        } else {
            engine_wait_events(e, 0, 0.05);
            got = engine_poll_events(e, evs, 64);
        }
        for (int k = 0; k < got; k++) {
            for (int i = 0; i < n; i++)
                if (rs[i].id == evs[k].id) res_event(&rs[i], &evs[k]);
            engine_event_free(&evs[k]);
        }
    }
}

static void req_tokens(struct engine_request *q, const struct fx *fx, int32_t off, int32_t len)
{
    memset(q, 0, sizeof *q);
    q->prompt_tokens = fx->text + off % (fx->n_text - len);
    q->n_prompt_tokens = len;
    engine_sampling_greedy(&q->sampling);
    q->max_tokens = fx->gen;
    q->ignore_eos = true;
}

static uint64_t submit_ok(struct engine *e, const struct engine_request *q, struct res *r)
{
    char err[512];
    enum engine_status why;
    memset(r, 0, sizeof *r);
    r->order_ok = true;
    r->id = engine_submit(e, q, &why, err, sizeof err);
    if (!r->id) tap_diag("submit refused: %s", err);
    return r->id;
}

static bool same_tokens(const struct res *a, const struct res *b)
{
    return a->n_tok == b->n_tok && memcmp(a->tok, b->tok, (size_t)a->n_tok * sizeof *a->tok) == 0;
}

static int32_t kv_used(struct engine *e)
{
    struct engine_stats s;
    engine_snapshot(e, &s);
    return s.kv_used;
}

/* Blocks are freed by the engine thread right after FINISHED is queued;
 * give it a moment before reading the counters. */
static int32_t kv_used_settled(struct engine *e)
{
    int32_t u = kv_used(e);
    for (int i = 0; i < 200 && u != 0; i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
        u = kv_used(e);
    }
    return u;
}

/* Runs each request alone (one engine, one after another). */
static void run_alone(struct fx *fx, struct engine *e, struct engine_request *qs, struct res *out,
                      int n)
{
    for (int i = 0; i < n; i++) {
        submit_ok(e, &qs[i], &out[i]);
        collect(e, &out[i], 1, fx->timeout_s, 0);
    }
}

/* 1. Batch invariance: 8 concurrent requests give the same greedy tokens as
 * each alone. */
static void sc_batch_invariance(struct fx *fx)
{
    enum { N = 8 };
    struct engine_config cfg;
    engine_config_default(&cfg);
    struct engine *e = fx->open(fx, &cfg, 0);
    if (!ok(e != NULL, "%s: open", fx->name)) return;
    struct engine_request qs[N];
    struct res alone[N], conc[N];
    for (int i = 0; i < N; i++) req_tokens(&qs[i], fx, 37 * i, 9 + fx->bi_len_step * i);
    run_alone(fx, e, qs, alone, N);
    for (int i = 0; i < N; i++) submit_ok(e, &qs[i], &conc[i]);
    /* Per-request occupancy while they run. */
    struct engine_req_info infos[N];
    int n_info = 0, sane = 0, running = 0;
    /* Up to 30 s (not a count of polls): a sanitizer build's first step is slow. */
    for (int k = 0; k < 30000 && running == 0; k++) {
        n_info = engine_requests(e, infos, N);
        running = 0;
        for (int i = 0; i < n_info && i < N; i++) running += infos[i].running;
        if (!running) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    for (int i = 0; i < n_info && i < N; i++) {
        bool known = false;
        for (int j = 0; j < N; j++) known = known || infos[i].id == conc[j].id;
        sane += known && infos[i].kv_blocks * 16 >= infos[i].n_computed &&
                (!infos[i].running || infos[i].kv_blocks > 0);
    }
    ok(running > 0 && n_info <= N && sane == n_info,
       "live request list: %d listed, %d running, block tables cover their tokens", n_info,
       running);
    ok(collect(e, conc, N, fx->timeout_s, 0), "%s: 8 concurrent requests finish", fx->name);
    int same = 0;
    for (int i = 0; i < N; i++) {
        same += same_tokens(&alone[i], &conc[i]) && conc[i].n_tok == fx->gen;
        if (!same_tokens(&alone[i], &conc[i]))
            tap_diag("request %d: %d tokens alone, %d batched", i, alone[i].n_tok, conc[i].n_tok);
    }
    is_int(same, N, "batch invariance: same greedy tokens batched as alone");
    int order = 0;
    for (int i = 0; i < N; i++) order += conc[i].order_ok && conc[i].st == ENGINE_LENGTH;
    is_int(order, N, "events in order, status length");
    is_int(kv_used_settled(e), 0, "no blocks used at the end");
    res_free(alone, N);
    res_free(conc, N);
    fx->close(fx, e);
}

/* 2. Prefix reuse: a second turn that resends the first turn's prompt and
 * reply prefills only the new tokens, and its TTFT is lower than cold. */
static void sc_prefix_reuse(struct fx *fx, int32_t len1, int32_t len_new)
{
    struct engine_config cfg;
    engine_config_default(&cfg);
    struct engine *e = fx->open(fx, &cfg, 0);
    struct engine *cold = fx->open(fx, &cfg, 0);
    if (!ok(e && cold, "%s: open", fx->name)) return;
    struct engine_request q1;
    struct res r1, r2, rc;
    req_tokens(&q1, fx, 0, len1);
    submit_ok(e, &q1, &r1);
    collect(e, &r1, 1, fx->timeout_s, 0);
    /* turn 2 = turn 1 prompt + reply + new text */
    int32_t n2 = len1 + r1.n_tok + len_new;
    int32_t *t2 = malloc((size_t)n2 * sizeof *t2);
    memcpy(t2, q1.prompt_tokens, (size_t)len1 * sizeof *t2);
    memcpy(t2 + len1, r1.tok, (size_t)r1.n_tok * sizeof *t2);
    memcpy(t2 + len1 + r1.n_tok, fx->text + 5000 % (fx->n_text - len_new),
           (size_t)len_new * sizeof *t2);
    struct engine_request q2 = q1;
    q2.prompt_tokens = t2;
    q2.n_prompt_tokens = n2;
    submit_ok(cold, &q2, &rc);
    collect(cold, &rc, 1, fx->timeout_s, 0);
    submit_ok(e, &q2, &r2);
    collect(e, &r2, 1, fx->timeout_s, 0);
    int32_t full_blocks = (len1 + r1.n_tok - 1) / 16 * 16;
    ok(r2.m.n_cached >= (len1 / 16) * 16 && r2.m.n_cached <= full_blocks,
       "%s: turn 2 reuses the cached prefix (%d of %d prompt tokens; turn 1 prompt %d)",
       fx->name, r2.m.n_cached, r2.m.n_prompt, len1);
    is_int(r2.m.n_computed, n2 - r2.m.n_cached, "turn 2 prefills only the rest");
    is_int(rc.m.n_cached, 0, "cold engine reuses nothing");
    ok(same_tokens(&r2, &rc), "turn 2 tokens with reuse = without");
    ok(r2.m.ttft_s < rc.m.ttft_s, "turn 2 TTFT with reuse %.2f ms < cold %.2f ms",
       r2.m.ttft_s * 1e3, rc.m.ttft_s * 1e3);
    struct engine_stats st;
    engine_snapshot(e, &st);
    ok(st.prefix_hit_tokens == (uint64_t)r2.m.n_cached && st.prefix_hit_rate > 0,
       "hit counters (%llu tokens, rate %.3f)", (unsigned long long)st.prefix_hit_tokens,
       st.prefix_hit_rate);
    ok(st.kv_cached > 0 && st.kv_used == 0, "finished turns leave cached blocks (%d), none used",
       st.kv_cached);
    free(t2);
    res_free(&r1, 1);
    res_free(&r2, 1);
    res_free(&rc, 1);
    fx->close(fx, e);
    fx->close(fx, cold);
}

/* 3. Preemption: a pool too small for all at once; same tokens as alone,
 * preemptions counted, no leaked blocks. */
static void sc_preemption(struct fx *fx, int32_t n_req, int32_t prompt, int32_t pool_blocks)
{
    struct engine_config cfg;
    engine_config_default(&cfg);
    cfg.step_tokens = 256; /* admit them all at once: their growth must collide */
    struct engine *e = fx->open(fx, &cfg, pool_blocks);
    if (!ok(e != NULL, "%s: open with %d blocks", fx->name, pool_blocks)) return;
    struct engine_request qs[16];
    struct res alone[16], conc[16];
    /* Lengths prompt, prompt - 1, ...: pass prompt just under a block
     * boundary, so that generating crosses it and each needs a new block. */
    for (int i = 0; i < n_req; i++) req_tokens(&qs[i], fx, 101 * i, prompt - i);
    run_alone(fx, e, qs, alone, n_req);
    /* Held while submitting, so they all start together and their growth
     * collides however slow the build (sanitizers) or fast the machine. */
    engine_pause(e, true);
    for (int i = 0; i < n_req; i++) submit_ok(e, &qs[i], &conc[i]);
    engine_pause(e, false);
    ok(collect(e, conc, n_req, fx->timeout_s, 0), "%s: all %d requests finish", fx->name, n_req);
    int same = 0, preempted = 0;
    for (int i = 0; i < n_req; i++) {
        same += same_tokens(&alone[i], &conc[i]) && conc[i].st == ENGINE_LENGTH;
        preempted += conc[i].m.n_preempted;
    }
    is_int(same, n_req, "same tokens as alone despite preemption");
    struct engine_stats st;
    engine_snapshot(e, &st);
    ok(st.preemptions > 0 && (int)st.preemptions == preempted,
       "preemptions counted: %llu (per request sum %d)", (unsigned long long)st.preemptions,
       preempted);
    is_int(kv_used_settled(e), 0, "used blocks back to 0 (no leak)");
    engine_snapshot(e, &st);
    is_int(st.kv_used + st.kv_cached + st.kv_free, st.kv_total, "used + cached + free = total");
    res_free(alone, n_req);
    res_free(conc, n_req);
    fx->close(fx, e);
}

/* Waits until r (polled alone) satisfies a condition on its events. */
static bool wait_for(struct engine *e, struct res *r, int type, int32_t count, double timeout_s)
{
    double until = fx_now() + timeout_s;
    struct engine_event evs[16];
    while (fx_now() < until && !r->done) {
        if (type == ENGINE_EV_PREFILL ? r->last_prefill_done >= count : r->n_ev[type] >= count)
            return true;
        engine_wait_events(e, r->id, 0.05);
        int got = engine_poll_request(e, r->id, evs, 16);
        for (int k = 0; k < got; k++) {
            res_event(r, &evs[k]);
            engine_event_free(&evs[k]);
        }
    }
    return false;
}

/* 4. Cancel while queued, mid-prefill and mid-decode. */
static void sc_cancel(struct fx *fx, int32_t long_prompt)
{
    struct engine_config cfg;
    engine_config_default(&cfg);
    cfg.step_tokens = 64;
    cfg.max_running = 2;
    struct engine *e = fx->open(fx, &cfg, 0);
    if (!ok(e != NULL, "%s: open", fx->name)) return;
    struct engine_request qa, qb, qc, qd;
    struct res ra, rb, rc, rd, ra_alone;
    req_tokens(&qa, fx, 3, 20);
    qa.max_tokens = fx->gen;
    run_alone(fx, e, &qa, &ra_alone, 1);

    req_tokens(&qb, fx, 50, long_prompt); /* mid-prefill victim */
    req_tokens(&qc, fx, 90, 12);          /* mid-decode victim */
    qc.max_tokens = 100000 > fx->gen * 50 ? fx->gen * 50 : 100000;
    req_tokens(&qd, fx, 70, 12);          /* queued victim (cap of 2 running) */
    submit_ok(e, &qb, &rb);
    submit_ok(e, &qc, &rc);
    submit_ok(e, &qd, &rd);
    bool mid = wait_for(e, &rb, ENGINE_EV_PREFILL, 1, fx->timeout_s);
    ok(mid && rb.last_prefill_done < long_prompt, "%s: long prompt is mid-prefill (%d/%d)",
       fx->name, rb.last_prefill_done, long_prompt);
    /* Held, so the cancel lands between two chunks of the prompt however
     * slow the build: at most the step in flight completes first. */
    engine_pause(e, true);
    ok(engine_cancel(e, rd.id) == 0, "cancel queued request");
    ok(engine_cancel(e, rb.id) == 0, "cancel mid-prefill request");
    engine_pause(e, false);
    wait_for(e, &rc, ENGINE_EV_TOKEN, 3, fx->timeout_s);
    ok(!rc.done && rc.n_tok >= 3, "third request is mid-decode (%d tokens)", rc.n_tok);
    ok(engine_cancel(e, rc.id) == 0, "cancel mid-decode request");
    submit_ok(e, &qa, &ra);
    struct res all[4] = {ra, rb, rc, rd};
    ok(collect(e, all, 4, fx->timeout_s, 0), "all finish");
    is_int(all[3].st, ENGINE_CANCELLED, "queued: cancelled");
    is_int(all[3].n_ev[ENGINE_EV_ADMITTED], 0, "queued: never admitted");
    is_int(all[1].st, ENGINE_CANCELLED, "mid-prefill: cancelled");
    ok(all[1].m.t_first_token == 0, "mid-prefill: no token");
    is_int(all[2].st, ENGINE_CANCELLED, "mid-decode: cancelled");
    ok(all[2].m.n_generated >= 3 && all[2].m.n_generated < qc.max_tokens,
       "mid-decode: stopped after %d tokens", all[2].m.n_generated);
    ok(engine_cancel(e, rc.id) != 0, "cancel of a finished request refused");
    ok(same_tokens(&all[0], &ra_alone) && all[0].st == ENGINE_LENGTH, "others unaffected");
    is_int(kv_used_settled(e), 0, "blocks freed");
    res_free(all, 4);
    res_free(&ra_alone, 1);
    fx->close(fx, e);
}

/* 5. Full queue, queue timeout, oversized request. */
static void sc_admission(struct fx *fx)
{
    struct engine_config cfg;
    engine_config_default(&cfg);
    cfg.max_running = 1;
    cfg.max_queue = 2;
    cfg.n_ctx = 512;
    struct engine *e = fx->open(fx, &cfg, 0);
    if (!ok(e != NULL, "%s: open", fx->name)) return;
    struct engine_request qa, qb;
    struct res ra, rb, rc, rt;
    req_tokens(&qa, fx, 0, 16);
    qa.max_tokens = fx->gen * 8; /* keeps the single running slot busy */
    submit_ok(e, &qa, &ra);
    wait_for(e, &ra, ENGINE_EV_ADMITTED, 1, fx->timeout_s);
    req_tokens(&qb, fx, 10, 16);
    qb.max_tokens = 4;
    submit_ok(e, &qb, &rb);
    struct engine_request qt = qb;
    qt.queue_timeout_s = 0.05;
    submit_ok(e, &qt, &rt);
    char err[512] = "";
    enum engine_status why = ENGINE_OK;
    double t0 = fx_now();
    uint64_t id = engine_submit(e, &qb, &why, err, sizeof err);
    double dt = fx_now() - t0;
    ok(id == 0 && why == ENGINE_REJECTED, "full queue: rejected (%s)", err);
    ok(dt < 0.05, "rejected at once (%.3f ms)", dt * 1e3);
    ok(strstr(err, "2") != NULL, "message gives the queue size");
    struct engine_request qo;
    req_tokens(&qo, fx, 0, 300);
    qo.max_tokens = 300;
    id = engine_submit(e, &qo, &why, err, sizeof err);
    ok(id == 0 && why == ENGINE_REJECTED && strstr(err, "300") && strstr(err, "600") &&
           strstr(err, "512"),
       "oversized: rejected with the numbers (%s)", err);
    struct res all[3] = {ra, rb, rt};
    (void)rc;
    ok(collect(e, all, 3, fx->timeout_s, 0), "remaining requests finish");
    is_int(all[2].st, ENGINE_TIMEOUT, "queue timeout: timeout");
    ok(all[2].m.queue_s >= 0.05 && all[2].n_ev[ENGINE_EV_ADMITTED] == 0,
       "timed out after %.1f ms in the queue, never admitted", all[2].m.queue_s * 1e3);
    ok(all[0].st == ENGINE_LENGTH && all[1].st == ENGINE_LENGTH, "the others complete");
    res_free(all, 3);
    fx->close(fx, e);
}

/* 6. Priorities and chunked prefill: while a long batch prompt prefills, an
 * interactive request is admitted within a step and decodes every step. */
static void sc_priorities(struct fx *fx, int32_t long_prompt, int32_t step_tokens)
{
    struct engine_config cfg;
    engine_config_default(&cfg);
    cfg.step_tokens = step_tokens;
    struct engine *e = fx->open(fx, &cfg, 0);
    if (!ok(e != NULL, "%s: open", fx->name)) return;
    struct engine_request qb, qi, qb2;
    struct res rb, ri, rb2;
    req_tokens(&qb, fx, 0, long_prompt);
    qb.priority = ENGINE_PRIO_BATCH;
    qb.max_tokens = 4;
    qb2 = qb; /* a second batch prompt queued behind it */
    qb2.prompt_tokens = fx->text + 7;
    qb2.n_prompt_tokens = long_prompt / 8;
    req_tokens(&qi, fx, 999, 10);
    qi.max_tokens = 40;
    submit_ok(e, &qb, &rb);
    submit_ok(e, &qb2, &rb2);
    wait_for(e, &rb, ENGINE_EV_PREFILL, step_tokens, fx->timeout_s);
    submit_ok(e, &qi, &ri);
    struct res all[3] = {rb, ri, rb2};
    ok(collect(e, all, 3, fx->timeout_s, 0), "%s: all finish", fx->name);
    struct engine_metrics *mb = &all[0].m, *mi = &all[1].m;
    ok(mi->t_first_token < mb->t_prefill_done,
       "interactive first token (%.1f ms) before the batch prefill ends (%.1f ms)",
       mi->t_first_token * 1e3, mb->t_prefill_done * 1e3);
    /* Count batch prefill chunks and interactive tokens during that window. */
    int32_t in_window = 0;
    for (int32_t k = 0; k < mi->n_generated; k++)
        if (mi->token_t[k] > mi->t_first_token - 1e-9 && mi->token_t[k] <= mb->t_prefill_done)
            in_window++;
    struct engine_stats st;
    engine_snapshot(e, &st);
    double max_gap = 0;
    for (int32_t k = 1; k < mi->n_generated; k++)
        if (mi->token_t[k] - mi->token_t[k - 1] > max_gap) max_gap = mi->token_t[k] - mi->token_t[k - 1];
    ok(max_gap <= 2.5 * st.step_s.max + 1e-3,
       "interactive inter-token gap max %.2f ms <= 2.5 x the longest step (%.2f ms)",
       max_gap * 1e3, st.step_s.max * 1e3);
    ok(in_window >= 2, "interactive decoded %d tokens during the batch prefill",
       in_window);
    ok(mi->queue_s <= 2.5 * st.step_s.max + 1e-3,
       "interactive admitted within a step despite the batch backlog (%.2f ms)", mi->queue_s * 1e3);
    ok(st.step_tokens.max <= step_tokens + 1, "steps stay within the token budget (max %.0f)",
       st.step_tokens.max);
    ok(all[0].st == ENGINE_LENGTH && all[2].st == ENGINE_LENGTH, "batch requests complete");
    res_free(all, 3);
    fx->close(fx, e);
}

/* 6b. Interactive work displaces batch work at the running cap: with every
 * slot held by decoding batch requests, an interactive request is admitted
 * at once (a batch request is preempted and later recomputed, same tokens). */
static void sc_displace(struct fx *fx)
{
    struct engine_config cfg;
    engine_config_default(&cfg);
    cfg.max_running = 2;
    struct engine *e = fx->open(fx, &cfg, 0);
    if (!ok(e != NULL, "%s: open", fx->name)) return;
    struct engine_request qb[2], qi;
    struct res alone[2], rb[2], ri;
    for (int i = 0; i < 2; i++) {
        req_tokens(&qb[i], fx, 300 * i, 30);
        qb[i].priority = ENGINE_PRIO_BATCH;
        qb[i].max_tokens = fx->gen * 4;
    }
    run_alone(fx, e, qb, alone, 2);
    for (int i = 0; i < 2; i++) submit_ok(e, &qb[i], &rb[i]);
    wait_for(e, &rb[1], ENGINE_EV_TOKEN, 2, fx->timeout_s);
    req_tokens(&qi, fx, 777, 12);
    submit_ok(e, &qi, &ri);
    struct res all[3] = {rb[0], rb[1], ri};
    ok(collect(e, all, 3, fx->timeout_s, 0), "%s: all finish", fx->name);
    struct engine_stats st;
    engine_snapshot(e, &st);
    ok(all[2].m.queue_s <= 2.5 * st.step_s.max + 1e-3,
       "interactive admitted at the running cap within a step (%.2f ms)", all[2].m.queue_s * 1e3);
    ok(all[0].m.n_preempted + all[1].m.n_preempted >= 1, "a batch request was preempted");
    ok(same_tokens(&all[0], &alone[0]) && same_tokens(&all[1], &alone[1]),
       "preempted batch requests still give their tokens");
    res_free(all, 3);
    res_free(alone, 2);
    fx->close(fx, e);
}

/* 7. A consumer that stops reading: consumer-stalled; others unaffected. */
static void sc_stall(struct fx *fx)
{
    struct engine_config cfg;
    engine_config_default(&cfg);
    cfg.event_limit = 16;
    struct engine *e = fx->open(fx, &cfg, 0);
    if (!ok(e != NULL, "%s: open", fx->name)) return;
    struct engine_request qa, qb;
    struct res ra, rb, rb_alone;
    req_tokens(&qb, fx, 40, 24);
    qb.max_tokens = 12; /* < event_limit events */
    run_alone(fx, e, &qb, &rb_alone, 1);
    req_tokens(&qa, fx, 10, 24);
    qa.max_tokens = 200;
    submit_ok(e, &qa, &ra);
    submit_ok(e, &qb, &rb);
    collect(e, &rb, 1, fx->timeout_s, ra.id);
    ok(rb.done && same_tokens(&rb, &rb_alone), "%s: the reading consumer's request completes",
       fx->name);
    /* Keep not reading until the engine is idle, then read the stalled one:
     * its last event says consumer-stalled. */
    struct engine_stats st;
    double until = fx_now() + fx->timeout_s;
    do {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
        engine_snapshot(e, &st);
    } while ((st.running || st.waiting) && fx_now() < until);
    collect(e, &ra, 1, fx->timeout_s, 0);
    is_int(ra.st, ENGINE_CONSUMER_STALLED, "the unread request ends consumer-stalled");
    ok(ra.m.n_generated < 200, "it was stopped early (%d tokens)", ra.m.n_generated);
    is_int(kv_used_settled(e), 0, "its blocks were freed");
    res_free(&ra, 1);
    res_free(&rb, 1);
    res_free(&rb_alone, 1);
    fx->close(fx, e);
}

static int sc_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* 8. Metrics: monotonic phases, counts add up, snapshot totals, histogram
 * percentiles vs exact ones of the measured inter-token gaps. */
static void sc_metrics(struct fx *fx)
{
    enum { N = 5 };
    struct engine_config cfg;
    engine_config_default(&cfg);
    cfg.step_tokens = 32;
    struct engine *e = fx->open(fx, &cfg, 0);
    if (!ok(e != NULL, "%s: open", fx->name)) return;
    struct engine_request qs[N];
    struct res rs[N];
    for (int i = 0; i < N; i++) {
        req_tokens(&qs[i], fx, 13 * i, 40 + 10 * i);
        submit_ok(e, &qs[i], &rs[i]);
    }
    collect(e, rs, N, fx->timeout_s, 0);
    int mono = 0, adds = 0, itl = 0;
    uint64_t gen = 0;
    for (int i = 0; i < N; i++) {
        struct engine_metrics *m = &rs[i].m;
        mono += m->t_arrival <= m->t_admitted && m->t_admitted <= m->t_first_sched &&
                m->t_first_sched <= m->t_prefill_done && m->t_prefill_done <= m->t_first_token &&
                m->t_first_token <= m->t_finished;
        adds += m->n_prompt == m->n_cached + m->n_computed && m->n_prompt == qs[i].n_prompt_tokens &&
                m->n_generated == rs[i].n_tok;
        bool inc = m->token_t[0] == m->t_first_token;
        for (int32_t k = 1; k < m->n_generated; k++) inc = inc && m->token_t[k] >= m->token_t[k - 1];
        itl += inc;
        gen += (uint64_t)m->n_generated;
        if (i == 0)
            ok(fabs(m->ttft_s - (m->t_first_token - m->t_arrival)) < 1e-9 &&
                   fabs(m->e2e_s - (m->t_finished - m->t_arrival)) < 1e-9 &&
                   fabs(m->tpot_s * (m->n_generated - 1) - m->decode_s) < 1e-9,
               "derived latencies match the timestamps");
    }
    is_int(mono, N, "phase timestamps monotonic");
    is_int(adds, N, "prompt = cached + computed; generated = token events");
    is_int(itl, N, "token times increasing from the first token");
    struct engine_stats st;
    engine_snapshot(e, &st);
    is_int((long long)st.generated_tokens, (long long)gen, "snapshot generated tokens add up");
    is_int((long long)st.finished[ENGINE_LENGTH], N, "snapshot finished count");
    is_int((long long)st.ttft.count, N, "TTFT histogram count");
    is_int((long long)st.itl.count, (long long)(gen - N), "ITL histogram has every gap");
    ok(st.ttft.p50 <= st.ttft.p90 && st.ttft.p90 <= st.ttft.p99 && st.ttft.p99 <= st.ttft.max * 1.2,
       "percentiles ordered");
    /* Histogram percentiles vs exact percentiles of the measured gaps. */
    double *gaps = malloc((size_t)(gen > 0 ? gen : 1) * sizeof *gaps);
    int32_t ng = 0;
    for (int i = 0; i < N; i++)
        for (int32_t k = 1; k < rs[i].m.n_generated; k++)
            gaps[ng++] = rs[i].m.token_t[k] - rs[i].m.token_t[k - 1];
    qsort(gaps, (size_t)ng, sizeof *gaps, sc_cmp_double);
    const double qv[3] = {0.5, 0.9, 0.99}, hv[3] = {st.itl.p50, st.itl.p90, st.itl.p99};
    int within = 0;
    for (int k = 0; k < 3 && ng > 0; k++) {
        int32_t rank = (int32_t)ceil(qv[k] * ng);
        double ex = gaps[(rank < 1 ? 1 : rank) - 1];
        double r = hv[k] > ex ? hv[k] / ex : ex / hv[k];
        within += r <= pow(10.0, 1.0 / 20) * 1.000001;
        tap_diag("ITL p%g: histogram %.3f ms, exact %.3f ms", qv[k] * 100, hv[k] * 1e3, ex * 1e3);
    }
    is_int(within, 3, "ITL p50/p90/p99 from the histogram within one bucket of exact");
    free(gaps);
    ok(st.steps > 0 && st.backend_s <= st.busy_s, "step counters (%llu steps)",
       (unsigned long long)st.steps);
    struct cJSON *j = engine_snapshot_json(e);
    ok(j != NULL, "snapshot as JSON");
    cJSON_Delete(j);
    res_free(rs, N);
    fx->close(fx, e);
}

#endif
