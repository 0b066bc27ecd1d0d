/* test_engine_embed: embedding requests through the engine on the real
 * default model (SmolLM2-135M, no pooling type: mean pooling; CPU backend).
 * The vector must not depend on how the scheduler cut the work: chunked
 * prefill (16-token steps) against one chunk, the same step as a generating
 * request's decodes, a preemption in the middle of its prefill (the pooling
 * starts over with the recomputation), last-token pooling over a cached
 * prefix. Also: L2 norm 1, dimensions, the FINISHED event's figures, and
 * refusals (chat messages, bad dimensions, a backend without hidden states).
 * The reference comparison is in tests/e2e/serve (test_embeddings.py). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_util.h"
#include "fake_backend.h"
#include "tap.h"

static const char *TEXT =
    "The GNU General Public License is a free, copyleft license for software and other kinds "
    "of works. The licenses for most software and other practical works are designed to take "
    "away your freedom to share and change the works. By contrast, the GNU General Public "
    "License is intended to guarantee your freedom to share and change all versions of a "
    "program, to make sure it remains free software for all its users.";

static char *model_path(void)
{
    static char buf[4096];
    return eu_model_path("smollm2", buf, sizeof buf) == 0 ? buf : NULL;
}

static struct engine *open_engine(const char *path, int32_t step_tokens, int32_t kv_blocks)
{
    struct engine_config c;
    engine_config_default(&c);
    c.model_path = path;
    c.backend.kind = BACKEND_CPU;
    c.backend.threads = 1;
    c.n_ctx = 512;
    c.step_tokens = step_tokens;
    if (kv_blocks > 0) {
        char err[512];
        struct engine *probe = engine_open(&c, err, sizeof err);
        if (!probe) return NULL;
        struct engine_info in;
        engine_info(probe, &in);
        c.backend.kv_bytes = (uint64_t)kv_blocks * 16 * in.kv_bytes_per_token;
        engine_close(probe);
    }
    char err[512];
    struct engine *e = engine_open(&c, err, sizeof err);
    if (!e) tap_diag("engine_open: %s", err);
    return e;
}

struct emb {
    float v[1024];
    int32_t n;
    enum engine_status st;
    struct engine_metrics m;
    char msg[256];
};

/* Waits for request id's FINISHED event into out. */
static void wait_fin(struct engine *e, uint64_t id, struct emb *out)
{
    struct engine_event evs[32];
    for (bool done = false; !done;) {
        engine_wait_events(e, id, 1.0);
        int n = engine_poll_request(e, id, evs, 32);
        for (int i = 0; i < n; i++) {
            if (evs[i].type == ENGINE_EV_FINISHED) {
                done = true;
                out->st = evs[i].status;
                out->n = evs[i].n_embedding < 1024 ? evs[i].n_embedding : 1024;
                if (evs[i].embedding) memcpy(out->v, evs[i].embedding, (size_t)out->n * 4);
                if (evs[i].metrics) out->m = *evs[i].metrics;
                out->m.token_t = NULL;
                snprintf(out->msg, sizeof out->msg, "%s", evs[i].message ? evs[i].message : "");
            }
            engine_event_free(&evs[i]);
        }
    }
}

static uint64_t submit(struct engine *e, const struct engine_request *q, char *err, size_t n)
{
    enum engine_status why;
    uint64_t id = engine_submit(e, q, &why, err, n);
    if (!id) tap_diag("submit: %s", err);
    return id;
}

static void embed(struct engine *e, const char *text, enum engine_pooling p, int32_t dims,
                  struct emb *out)
{
    struct engine_request q = {.prompt = text, .embed = true, .pooling = p, .dimensions = dims};
    char err[512];
    memset(out, 0, sizeof *out);
    uint64_t id = submit(e, &q, err, sizeof err);
    if (id) wait_fin(e, id, out);
    else out->st = ENGINE_ERROR;
}

static double cosine(const float *a, const float *b, int32_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (int32_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0;
}

static double norm(const float *a, int32_t n)
{
    double s = 0;
    for (int32_t i = 0; i < n; i++) s += (double)a[i] * a[i];
    return sqrt(s);
}

/* A backend that cannot return hidden states refuses at submit. */
static void fake_refuses(void)
{
    struct fake *f = fake_open(256, 16);
    struct engine_config c;
    engine_config_default(&c);
    c.parts.model = &f->model;
    c.parts.backend = &f->be;
    char err[512];
    struct engine *e = engine_open(&c, err, sizeof err);
    if (!ok(e != NULL, "fake-backend engine opens")) {
        fake_free(f);
        return;
    }
    struct engine_info in;
    engine_info(e, &in);
    ok(in.n_embd == 0 && strstr(in.embd_why, "hidden states"), "fake backend: n_embd 0 (%s)",
       in.embd_why);
    int32_t toks[3] = {1, 2, 3};
    struct engine_request q = {.prompt_tokens = toks, .n_prompt_tokens = 3, .embed = true};
    enum engine_status why;
    uint64_t id = engine_submit(e, &q, &why, err, sizeof err);
    ok(id == 0 && why == ENGINE_ERROR && strstr(err, "hidden states"),
       "fake backend: embedding refused at submit (%s)", err);
    engine_close(e);
    fake_free(f);
}

int main(void)
{
    const char *path = model_path();
    if (!path) return tap_bail("no default model (packaging/fetch-model)");
    fake_refuses();

    struct engine *big = open_engine(path, 512, 0), *small = open_engine(path, 16, 0);
    if (!big || !small) return tap_bail("cannot open the engine on %s", path);
    struct engine_info in;
    engine_info(big, &in);
    ok(in.n_embd == 576 && in.pooling == ENGINE_POOL_MEAN && !in.embd_why[0],
       "SmolLM2: n_embd %d, pooling %s (no pooling type: mean)", in.n_embd,
       engine_pooling_name(in.pooling));

    struct emb one, chunked;
    embed(big, TEXT, ENGINE_POOL_MODEL, 0, &one);
    ok(one.st == ENGINE_OK && one.n == 576, "mean: ok, 576 dims (%s %s)",
       engine_status_name(one.st), one.msg);
    ok(fabs(norm(one.v, one.n) - 1) < 1e-5, "mean: L2 norm %.7f", norm(one.v, one.n));
    ok(one.m.n_prompt > 64 && one.m.n_generated == 0 && one.m.n_cached == 0 &&
       one.m.prefill_s > 0 && one.m.e2e_s >= one.m.prefill_s,
       "metrics: %d prompt tokens, none generated, prefill %.3f s, e2e %.3f s", one.m.n_prompt,
       one.m.prefill_s, one.m.e2e_s);
    embed(small, TEXT, ENGINE_POOL_MODEL, 0, &chunked);
    double c = cosine(one.v, chunked.v, 576);
    ok(chunked.st == ENGINE_OK && c > 0.99999,
       "mean over 16-token chunks = one chunk (cosine %.7f)", c);

    /* the same step as a generating request's decodes */
    engine_pause(small, true);
    struct engine_request g = {.prompt = "Once upon a time", .max_tokens = 24};
    engine_sampling_greedy(&g.sampling);
    char err[512];
    uint64_t gid = submit(small, &g, err, sizeof err);
    struct engine_request q = {.prompt = TEXT, .embed = true};
    uint64_t eid = submit(small, &q, err, sizeof err);
    engine_pause(small, false);
    struct emb mixed, gen;
    wait_fin(small, eid, &mixed);
    wait_fin(small, gid, &gen);
    c = cosine(one.v, mixed.v, 576);
    ok(mixed.st == ENGINE_OK && gen.m.n_generated > 0 && c > 0.99999,
       "beside a generating request (%d tokens): cosine %.7f", gen.m.n_generated, c);

    /* last-token pooling reuses a cached prefix; mean never does */
    struct emb l1, l2, m2;
    embed(big, TEXT, ENGINE_POOL_LAST, 0, &l1);
    embed(big, TEXT, ENGINE_POOL_LAST, 0, &l2);
    c = cosine(l1.v, l2.v, 576);
    ok(l2.st == ENGINE_OK && l2.m.n_cached > 0 && c > 0.99999,
       "last: a second time over %d cached tokens, cosine %.7f", l2.m.n_cached, c);
    ok(cosine(l1.v, one.v, 576) < 0.9999, "last differs from mean (cosine %.5f)",
       cosine(l1.v, one.v, 576));
    embed(big, TEXT, ENGINE_POOL_MEAN, 0, &m2);
    ok(m2.m.n_cached == 0 && cosine(m2.v, one.v, 576) > 0.99999,
       "mean: no cached prefix used (%d), same vector", m2.m.n_cached);

    /* dimensions: the first N, re-normalised */
    struct emb d;
    embed(big, TEXT, ENGINE_POOL_MODEL, 64, &d);
    double nf = norm(one.v, 64), worst = 0;
    for (int i = 0; i < 64; i++) worst = fmax(worst, fabs(d.v[i] - one.v[i] / nf));
    ok(d.n == 64 && worst < 1e-5, "dimensions 64: first 64 re-normalised (max diff %.2e)", worst);

    /* refusals */
    struct engine_message msg = {"user", "hi"};
    struct engine_request bad = {.messages = &msg, .n_messages = 1, .embed = true};
    enum engine_status why;
    ok(engine_submit(big, &bad, &why, err, sizeof err) == 0 && why == ENGINE_ERROR &&
       strstr(err, "messages"), "chat messages refused (%s)", err);
    struct engine_request bd = {.prompt = "x", .embed = true, .dimensions = 577};
    ok(engine_submit(big, &bd, &why, err, sizeof err) == 0 && strstr(err, "dimensions"),
       "dimensions 577 refused (%s)", err);
    struct engine_request bp = {.prompt = "x", .embed = true, .pooling = (enum engine_pooling)9};
    ok(engine_submit(big, &bp, &why, err, sizeof err) == 0 && strstr(err, "pooling"),
       "unknown pooling refused (%s)", err);
    char text2[2048];
    snprintf(text2, sizeof text2, "%s %s", TEXT, TEXT);
    struct emb two;
    embed(big, text2, ENGINE_POOL_MODEL, 0, &two);
    engine_close(big);
    engine_close(small);

    /* preemption mid-prefill: a 13-block pool, an interactive request (2
     * blocks) that decodes past its blocks while a batch embedding (10
     * blocks) prefills one token a step; the embedding is preempted,
     * recomputed, and its vector unchanged */
    struct engine *tight = open_engine(path, 2, 13);
    if (!tight) return tap_bail("cannot open the small-pool engine");
    engine_pause(tight, true);
    struct engine_request gi = {.prompt = "Once upon a time there was a small town by the sea, "
                                          "and in it",
                                .max_tokens = 48, .ignore_eos = true};
    engine_sampling_greedy(&gi.sampling);
    gid = submit(tight, &gi, err, sizeof err);
    struct engine_request qe = {.prompt = text2, .embed = true, .priority = ENGINE_PRIO_BATCH};
    eid = submit(tight, &qe, err, sizeof err);
    engine_pause(tight, false);
    struct emb pre, gen2;
    wait_fin(tight, gid, &gen2);
    wait_fin(tight, eid, &pre);
    c = cosine(two.v, pre.v, 576);
    ok(pre.st == ENGINE_OK && c > 0.99999, "after %d preemption(s): ok, cosine %.7f",
       pre.m.n_preempted, c);
    ok(pre.m.n_preempted > 0, "the embedding was preempted (%d)", pre.m.n_preempted);
    engine_close(tight);
    return tap_done();
}
