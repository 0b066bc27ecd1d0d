/* test_engine_fake: the serving-core scenarios (scenarios.h) on a
 * deterministic fake backend whose output depends only on the token history
 * it reads back through the block tables: fast, and exact about KV
 * bookkeeping. Also: scoring requests, snapshot JSON, refusals. */
#include "fake_backend.h"
#include "scenarios.h"

struct pair {
    struct engine *e;
    struct fake *f;
};

static struct pair pairs[16];

static struct engine *fake_engine(struct fx *fx, struct engine_config *cfg, int32_t kv_blocks)
{
    struct fake *f = fake_open(kv_blocks > 0 ? kv_blocks : 1024, 16);
    if (!f) return NULL;
    f->delay_ns_per_token = 20000; /* 20 us per token, 0.5 ms per step: steps take time */
    f->delay_ns_per_step = 500000;
    cfg->parts.model = &f->model;
    cfg->parts.backend = &f->be;
    char err[256];
    struct engine *e = engine_open(cfg, err, sizeof err);
    if (!e) {
        tap_diag("engine_open: %s", err);
        fake_free(f);
        return NULL;
    }
    for (int i = 0; i < 16; i++)
        if (!pairs[i].e) {
            pairs[i].e = e;
            pairs[i].f = f;
            break;
        }
    (void)fx;
    return e;
}

static void fake_engine_close(struct fx *fx, struct engine *e)
{
    (void)fx;
    engine_close(e);
    for (int i = 0; i < 16; i++)
        if (pairs[i].e == e) {
            fake_free(pairs[i].f);
            pairs[i].e = NULL;
        }
}

/* Scoring: nll of the fake model is known exactly (one logit 4, others 0). */
static void sc_score(struct fx *fx)
{
    struct engine_config cfg;
    engine_config_default(&cfg);
    struct engine *e = fake_engine(fx, &cfg, 0);
    struct engine_request q;
    struct res r;
    req_tokens(&q, fx, 0, 200);
    q.score = true;
    q.score_from = 100;
    q.max_tokens = 0;
    submit_ok(e, &q, &r);
    collect(e, &r, 1, fx->timeout_s, 0);
    is_int(r.st, ENGINE_OK, "score request finishes ok");
    is_int(r.m.n_scored, 99, "positions [100, 199) scored");
    is_int(r.n_tok, 0, "score request generates nothing");
    /* Same request with 'generate' to learn the model's predictions. */
    double lse = log(FAKE_VOCAB - 1 + exp(4.0));
    ok(r.m.nll_sum >= 99 * (lse - 4) - 1e-6 && r.m.nll_sum <= 99 * lse + 1e-6,
       "nll within the model's bounds (%.4f)", r.m.nll_sum);
    res_free(&r, 1);
    fake_engine_close(fx, e);
}

/* engine_pause: held requests are queued but get no tokens; queue timeouts
 * and cancellation still work; released, they run to the same tokens. */
static void sc_pause(struct fx *fx)
{
    struct engine_config cfg;
    engine_config_default(&cfg);
    struct engine *e = fake_engine(fx, &cfg, 0);
    struct engine_request q[3];
    struct res r[3], alone;
    for (int i = 0; i < 3; i++) req_tokens(&q[i], fx, 17 * i, 30);
    req_tokens(&q[0], fx, 0, 30);
    submit_ok(e, &q[0], &alone);
    collect(e, &alone, 1, fx->timeout_s, 0);
    engine_pause(e, true);
    q[1].queue_timeout_s = 0.05;
    for (int i = 0; i < 3; i++) submit_ok(e, &q[i], &r[i]);
    engine_cancel(e, r[2].id);
    /* Only r[1] and r[2] can finish while held. */
    ok(!collect(e, r, 3, 0.5, 0), "held: not every request finishes");
    int others = 0;
    for (int t = ENGINE_EV_QUEUED + 1; t <= ENGINE_EV_FINISHED; t++) others += r[0].n_ev[t];
    ok(r[0].n_ev[ENGINE_EV_QUEUED] == 1 && others == 0,
       "held: a queued event only (%d queued, %d others)", r[0].n_ev[ENGINE_EV_QUEUED], others);
    is_str(engine_status_name(r[1].st), "timeout", "held: queue timeout still fires");
    is_str(engine_status_name(r[2].st), "cancelled", "held: cancel still works");
    engine_pause(e, false);
    ok(collect(e, &r[0], 1, fx->timeout_s, 0), "released: the held request finishes");
    ok(same_tokens(&alone, &r[0]), "released: same tokens as before the hold");
    res_free(r, 3);
    res_free(&alone, 1);
    fake_engine_close(fx, e);
}

/* Malformed requests are refused at submit with ENGINE_ERROR and a reason. */
static void sc_bad(struct fx *fx)
{
    struct engine_config cfg;
    engine_config_default(&cfg);
    struct engine *e = fake_engine(fx, &cfg, 0);
    char err[256];
    enum engine_status why;
    struct engine_request q;
    memset(&q, 0, sizeof q);
    ok(engine_submit(e, &q, &why, err, sizeof err) == 0 && why == ENGINE_ERROR,
       "no prompt: error (%s)", err);
    req_tokens(&q, fx, 0, 10);
    q.prompt = "text too";
    ok(engine_submit(e, &q, &why, err, sizeof err) == 0 && why == ENGINE_ERROR,
       "two prompt sources: error (%s)", err);
    int32_t badtok[2] = {1, FAKE_VOCAB};
    req_tokens(&q, fx, 0, 10);
    q.prompt_tokens = badtok;
    q.n_prompt_tokens = 2;
    ok(engine_submit(e, &q, &why, err, sizeof err) == 0 && why == ENGINE_ERROR &&
           strstr(err, "index 1"),
       "token outside the vocabulary: error naming it (%s)", err);
    struct engine_message m = {"user", "hi"};
    memset(&q, 0, sizeof q);
    q.messages = &m;
    q.n_messages = 1;
    ok(engine_submit(e, &q, &why, err, sizeof err) == 0 && why == ENGINE_ERROR,
       "messages without a tokenizer: error (%s)", err);
    ok(engine_cancel(e, 12345) != 0, "cancel of an unknown id refused");
    fake_engine_close(fx, e);
}

int main(void)
{
    enum { NT = 6000 };
    static int32_t text[NT];
    uint32_t s = 7;
    for (int i = 0; i < NT; i++) {
        s = s * 1103515245u + 12345u;
        text[i] = 1 + (int32_t)((s >> 16) % (FAKE_VOCAB - 1));
    }
    struct fx fx = {.name = "fake", .open = fake_engine, .close = fake_engine_close,
                    .text = text, .n_text = NT, .gen = 24, .bi_len_step = 23, .timeout_s = 60};
    sc_batch_invariance(&fx);
    sc_prefix_reuse(&fx, 300, 20);
    sc_preemption(&fx, 6, 40, 15); /* four fit at 3 blocks each; growing to 4, they cannot */
    sc_cancel(&fx, 1000);
    sc_admission(&fx);
    sc_priorities(&fx, 2000, 64);
    sc_displace(&fx);
    sc_stall(&fx);
    sc_metrics(&fx);
    sc_score(&fx);
    sc_bad(&fx);
    sc_pause(&fx);
    return tap_done();
}
