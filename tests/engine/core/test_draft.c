/* test_draft: speculative decoding with a draft model on the real default
 * model (SmolLM2-135M-Instruct Q4_1, CPU backend). The draft (argv[1]) is
 * the same weights requantized to Q4_0 by the reference's llama-quantize
 * (test_draft.sh makes it): the same vocabulary, close but not equal
 * logits, so some guesses are accepted and some rejected. The oracle is the
 * same request decoded plainly (guesses off for the request) on the same
 * engine: token ids and text identical, for prompts alone, in a batch, in a
 * small KV pool that preempts, and with seeded sampling. Also: the draft
 * guessed, and both accepted and rejected guesses occurred (so identity is
 * not the trivial "nothing guessed" or "the draft is the target"); every KV
 * block comes back; a draft of another vocabulary is refused by name; the
 * same file as its own draft accepts nearly everything. A fresh long
 * prompt is fed to the draft in the target's prefill steps (guesses from the
 * first decode step); a draft state that lags (the target reused cached
 * prefix blocks) catches up within the step budget per step (never the
 * whole prompt in one step), decoding plainly meanwhile, then guesses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_util.h"
#include "scheduler.h"
#include "spec_util.h"
#include "tap.h"

#define GEN 160

int main(int argc, char **argv)
{
    static char path[4096], gemma[4096];
    if (eu_model_path("smollm2", path, sizeof path) != 0)
        return tap_bail("default model unavailable (packaging/fetch-model --print-path)");
    if (argc < 2) return tap_bail("usage: test_draft DRAFT.gguf (test_draft.sh makes it)");
    const char *draft = argv[1];

    struct engine_message msgs[3][1] = {
        {{"user", "Write a long story about a lighthouse keeper and a storm."}},
        {{"user", "Explain how a hash table works, with an example in C."}},
        {{"user", "List the numbers from 1 to 60, one per line, each with its square."}},
    };
    enum { NP = 3 };
    struct engine_config cfg;
    engine_config_default(&cfg);
    cfg.model_path = path;
    cfg.backend.kind = BACKEND_CPU;
    cfg.backend.threads = 1;
    cfg.n_ctx = 1024;
    cfg.draft_model = draft;
    char err[512];
    struct engine *e = engine_open(&cfg, err, sizeof err);
    if (!e) return tap_bail("engine_open with draft %s: %s", draft, err);
    struct engine_info info;
    engine_info(e, &info);
    ok(info.draft.name && strstr(draft, info.draft.name) && info.draft.weight_bytes > 0,
       "engine_info names the draft (%s, %.1f MiB)", info.draft.name ? info.draft.name : "-",
       info.draft.weight_bytes / 1048576.0);

    static struct res plain[NP], one[NP], many[NP];
    struct engine_request q[NP];
    spec_requests(q, msgs, NP, GEN);
    spec_plain(e, q, NP, plain, GEN);   /* the oracle: each prompt alone, guesses off */
    int guessed = 0, accepted = 0;
    for (int i = 0; i < NP; i++) {
        run_many(e, &q[i], 1, &one[i]);
        const struct engine_metrics *m = &one[i].m;
        ok(same(&one[i], &plain[i]), "draft, alone, prompt %d: identical (%d tokens; first diff %d)",
           i, one[i].n_tok, first_diff(&one[i], &plain[i]));
        tap_diag("prompt %d: %d steps with guesses, %d guessed, %d accepted (%.0f %%)", i,
                 m->n_spec_steps, m->n_draft_tokens, m->n_accepted_tokens,
                 m->n_draft_tokens ? 100.0 * m->n_accepted_tokens / m->n_draft_tokens : 0.0);
        guessed += m->n_draft_tokens;
        accepted += m->n_accepted_tokens;
    }
    ok(accepted >= GEN / 2 && accepted < guessed,
       "the Q4_0 draft: guesses accepted (%d) and rejected (%d)", accepted, guessed - accepted);
    run_many(e, q, NP, many);
    for (int i = 0; i < NP; i++)
        ok(same(&many[i], &plain[i]), "draft, %d in a batch, prompt %d: identical (first diff %d)",
           NP, i, first_diff(&many[i], &plain[i]));
    for (int i = 0; i < 2; i++) {
        struct engine_request qt = q[i];
        engine_sampling_default(&qt.sampling);
        qt.sampling.temp = 0.8f;
        qt.sampling.seed = 77 + (uint64_t)i;
        struct res a, b;
        qt.lookup_k = -1;
        run_many(e, &qt, 1, &a);
        qt.lookup_k = 0;
        run_many(e, &qt, 1, &b);
        ok(same(&a, &b) && a.n_tok == GEN && b.m.n_draft_tokens > 0,
           "sampled (temperature 0.8, seed %d): same draws (first diff %d, %d of %d accepted)",
           77 + i, first_diff(&a, &b), b.m.n_accepted_tokens, b.m.n_draft_tokens);
    }
    /* A long fresh prompt, a short reply: the draft is fed the prompt in
     * the target's prefill steps, so it guesses from the first decode step
     * on and never catches up. Run again, the target reuses the prompt's
     * cached blocks that the draft never computed: the draft must catch up
     * over several decode steps (what every prompt cost before), and keeps
     * fewer guesses. */
    {
        static char mp[12288];
        size_t ml = 0;
        for (int i = 1; i <= 30 && ml < sizeof mp - 200; i++)
            ml += (size_t)snprintf(mp + ml, sizeof mp - ml,
                                   "Note %d: the mill on river %d grinds %d sacks on day %d. ", i,
                                   i, 30 + 3 * i, i % 7 + 1);
        snprintf(mp + ml, sizeof mp - ml, "Repeat the first note.");
        struct engine_message mmsg[1][1] = {{{"user", mp}}};
        enum { SHORT = 48 };
        struct engine_request qm;
        spec_requests(&qm, mmsg, 1, SHORT);
        struct engine_stats a0, a1, a2;
        static struct res fresh, cached, mplain;
        engine_snapshot(e, &a0);
        run_many(e, &qm, 1, &fresh);
        engine_snapshot(e, &a1);
        run_many(e, &qm, 1, &cached);
        engine_snapshot(e, &a2);
        spec_plain(e, &qm, 1, &mplain, SHORT);
        int32_t mn = fresh.m.n_prompt, acc = fresh.m.n_accepted_tokens;
        int32_t dec = fresh.n_tok - 1 - acc; /* decode steps after the prefill's token */
        ok(mn >= 600 && same(&fresh, &mplain) && same(&cached, &mplain),
           "long prompt (%d tokens), short reply (%d): identical, fresh and cached (first diffs "
           "%d, %d)", mn, fresh.n_tok, first_diff(&fresh, &mplain), first_diff(&cached, &mplain));
        ok(a1.draft_catchup == a0.draft_catchup &&
           a1.draft_fed_prefill - a0.draft_fed_prefill >= (uint64_t)mn &&
           fresh.m.n_spec_steps >= dec - 1,
           "fresh prompt: the draft fed with the prefill (%llu tokens), no catch-up step (%llu), "
           "guesses in %d of %d decode steps",
           (unsigned long long)(a1.draft_fed_prefill - a0.draft_fed_prefill),
           (unsigned long long)(a1.draft_catchup - a0.draft_catchup), fresh.m.n_spec_steps, dec);
        int32_t cdec = cached.n_tok - 1 - cached.m.n_accepted_tokens;
        ok(cached.m.n_cached > 0 && a2.draft_catchup > a1.draft_catchup &&
           acc > cached.m.n_accepted_tokens && dec < cdec,
           "guesses kept: %d fed with the prefill vs %d catching up after a cached prefix "
           "(%llu steps behind); target steps %d vs %d", acc, cached.m.n_accepted_tokens,
           (unsigned long long)(a2.draft_catchup - a1.draft_catchup), dec, cdec);
        /* Two tokens leave no room for a guess: the draft is not fed. */
        struct engine_request q2 = qm;
        q2.max_tokens = 2;
        static struct res two;
        struct engine_stats a3, a4;
        engine_snapshot(e, &a3);
        run_many(e, &q2, 1, &two);
        engine_snapshot(e, &a4);
        ok(two.n_tok == 2 && a4.draft_fed_prefill == a3.draft_fed_prefill &&
           a2.draft_fed_prefill > a1.draft_fed_prefill,
           "a 2-token reply: the draft not fed (%llu tokens; the cached run fed %llu)",
           (unsigned long long)(a4.draft_fed_prefill - a3.draft_fed_prefill),
           (unsigned long long)(a2.draft_fed_prefill - a1.draft_fed_prefill));
    }

    /* A long prompt: the draft catches up in bounded chunks across steps
     * (at most step_tokens per step) while the sequence decodes plainly. */
    static char longp[8192];
    size_t lp = 0;
    for (int i = 1; i <= 28 && lp < sizeof longp - 200; i++)
        lp += (size_t)snprintf(longp + lp, sizeof longp - lp,
                               "Fact %d: the lighthouse on island %d has %d steps and a red lamp. ",
                               i, i, 100 + 7 * i);
    snprintf(longp + lp, sizeof longp - lp, "Summarise these facts.");
    struct engine_message lmsg[1][1] = {{{"user", longp}}};
    struct engine_request ql;
    spec_requests(&ql, lmsg, 1, GEN);
    struct engine_stats st0, st;
    engine_snapshot(e, &st0);
    static struct res lplain, ldraft;
    spec_plain(e, &ql, 1, &lplain, GEN);
    run_many(e, &ql, 1, &ldraft);
    engine_snapshot(e, &st);
    int32_t np = ldraft.m.n_prompt, budget = st.step_tokens_budget;
    uint64_t calls = st.draft_catchup - st0.draft_catchup;
    ok(same(&ldraft, &lplain), "long prompt (%d tokens), draft: identical (first diff %d)", np,
       first_diff(&ldraft, &lplain));
    /* A step feeds the draft at most its catch-up budget, or a prefill chunk
     * (bounded by the step's batch) beside a proposal's small catch-up. */
    struct sched_config scc = {.step_tokens = budget, .max_running = st.max_running};
    int32_t most = sched_max_batch_tokens(&scc) + ENGINE_DRAFT_K + 1;
    ok(np > 4 * budget && st.draft_catchup_max <= most && calls >= (uint64_t)(np / budget) - 1,
       "long prompt: the draft caught up at most %d tokens a step (most %d, %llu steps behind)",
       budget, st.draft_catchup_max, (unsigned long long)calls);
    ok(ldraft.m.n_draft_tokens > 0 && ldraft.m.n_spec_steps + (int32_t)calls <= GEN,
       "long prompt: guesses once caught up (%d steps with guesses, %d guessed, %d accepted)",
       ldraft.m.n_spec_steps, ldraft.m.n_draft_tokens, ldraft.m.n_accepted_tokens);

    engine_snapshot(e, &st);
    ok(st.kv_used == 0 && st.spec_accepted_tokens > 0 && st.draft_s > 0,
       "stats: every block back (used %d), %llu accepted, %.0f ms in the draft", st.kv_used,
       (unsigned long long)st.spec_accepted_tokens, st.draft_s * 1e3);
    uint64_t per_tok = info.kv_bytes_per_token;
    engine_close(e);

    /* A small pool: the batch preempts and recomputes, drafts in flight. */
    cfg.backend.kv_bytes = (uint64_t)28 * 16 * per_tok;
    cfg.n_ctx = 0;
    e = engine_open(&cfg, err, sizeof err);
    if (!e) return tap_bail("engine_open (small pool): %s", err);
    run_many(e, q, NP, many);
    int pre = 0;
    for (int i = 0; i < NP; i++) {
        pre += many[i].m.n_preempted;
        ok(same(&many[i], &plain[i]), "small pool, prompt %d: identical (first diff %d, preempted %d)",
           i, first_diff(&many[i], &plain[i]), many[i].m.n_preempted);
    }
    ok(pre > 0, "small pool: the batch was preempted (%d times)", pre);
    engine_snapshot(e, &st);
    ok(st.kv_used == 0, "small pool: every block back (used %d)", st.kv_used);
    engine_close(e);

    /* The target as its own draft: the same logits, nearly every guess kept. */
    cfg.backend.kv_bytes = 0;
    cfg.n_ctx = 1024;
    cfg.draft_model = path;
    e = engine_open(&cfg, err, sizeof err);
    if (!e) return tap_bail("engine_open (self draft): %s", err);
    run_many(e, &q[0], 1, &one[0]);
    ok(same(&one[0], &plain[0]) &&
           one[0].m.n_accepted_tokens * 10 >= one[0].m.n_draft_tokens * 9,
       "self draft: identical, %d of %d guesses accepted", one[0].m.n_accepted_tokens,
       one[0].m.n_draft_tokens);
    engine_close(e);

    /* Another vocabulary: refused at open, naming it. */
    if (eu_model_path("gemma3-270m", gemma, sizeof gemma) == 0) {
        cfg.draft_model = gemma;
        e = engine_open(&cfg, err, sizeof err);
        ok(!e && strstr(err, "vocabulary"), "a Gemma 3 draft for SmolLM2: refused (%s)", err);
        if (e) engine_close(e);
    } else {
        ok(0, "Gemma 3 model unavailable (packaging/fetch-model --model gemma3-270m)");
    }
    cfg.draft_model = "/nonexistent/draft.gguf";
    e = engine_open(&cfg, err, sizeof err);
    ok(!e && strstr(err, "draft model"), "a missing draft file: refused (%s)", err);
    if (e) engine_close(e);
    return tap_done();
}
