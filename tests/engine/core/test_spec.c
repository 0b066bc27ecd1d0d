/* test_spec: speculative decoding by n-gram prompt lookup on the real
 * default model (SmolLM2-135M-Instruct, CPU backend). The oracle is the same
 * request decoded plainly (lookup off) on the same engine: the token ids
 * and the text must be identical, byte for byte, for several prompts (an
 * editing prompt where many guesses are accepted, free writing where few
 * are), replies of 240 tokens, one request at a time and several in one
 * batch, a small KV pool that preempts, stop strings and max_tokens that
 * fall inside accepted runs (tokens k - 1, k and k + 1 out of one step),
 * and seeded sampling (a guess is accepted when the target's own draw
 * equals it, so the same seed draws the same tokens). It also checks that
 * guesses were made and accepted on the editing prompt (so identity is not
 * the trivial "nothing guessed"), the KV pool's blocks all come back, and
 * the scheduler alone (batch rows, commit, acceptance, pool accounting).
 * Fails (never skips) without the model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_util.h"
#include "scheduler.h"
#include "spec_util.h"
#include "tap.h"

#define GEN 240

static char *model_path(void)
{
    static char buf[4096];
    return eu_model_path("smollm2", buf, sizeof buf) == 0 ? buf : NULL;
}

static void unit_lookup(void)
{
    int32_t t[] = {1, 2, 3, 4, 5, 9, 1, 2, 3}, g[8];
    int32_t n = sched_lookup(t, 9, 4, g);
    ok(n == 4 && g[0] == 4 && g[1] == 5 && g[2] == 9 && g[3] == 1,
       "lookup: 3-gram copies what followed");
    int32_t t2[] = {7, 8, 1, 2, 6, 1, 2, 5, 2};
    n = sched_lookup(t2, 9, 3, g);
    ok(n == 2 && g[0] == 5 && g[1] == 2, "lookup: latest 1-gram occurrence, up to the end (%d)", n);
    /* "9 1 2 3" occurs twice; the latest 3-gram "1 2 3" (followed by 7) is
     * not what the sequence is copying: the 4-token match (followed by 5). */
    int32_t t5[] = {9, 1, 2, 3, 5, 6, 8, 1, 2, 3, 7, 9, 1, 2, 3};
    n = sched_lookup(t5, 15, 2, g);
    ok(n == 2 && g[0] == 5 && g[1] == 6, "lookup: the longest suffix match, not the latest (%d: %d %d)",
       n, g[0], g[1]);
    int32_t t3[] = {1, 2, 3, 4};
    ok(sched_lookup(t3, 4, 4, g) == 0, "lookup: no earlier occurrence, no guess");
    int32_t t4[] = {5, 5, 5};
    n = sched_lookup(t4, 3, 4, g);
    ok(n == 1 && g[0] == 5, "lookup: a guess never reads past the known tokens (%d)", n);
}

/* The scheduler alone (no backend): a decode's guesses in the batch, the
 * rows asked for, the commit, the acceptance and the pool's accounting. */
static void unit_sched(void)
{
    char err[256];
    struct kv kv;
    struct sched s;
    struct sched_config cfg = {.step_tokens = 64, .max_running = 4, .max_logit_rows = 8};
    if (!ok(kv_init(&kv, 4, 4, err, sizeof err) == 0 &&
                sched_init(&s, &kv, &cfg, err, sizeof err) == 0,
            "sched: init"))
        return;
    struct sched_seq a, b;
    sched_seq_init(&a, 1, 0);
    sched_seq_init(&b, 2, 0);
    int32_t ta[] = {5, 6, 7, 8, 9, 5, 6}; /* "5 6" seen before, followed by 7 8 9 */
    for (int i = 0; i < 7; i++) sched_seq_push(&a, ta[i]);
    a.n_prompt = 7;
    a.lookup_k = 3;
    sched_add(&s, &a);
    int32_t n = sched_plan(&s); /* prefill */
    sched_commit(&s);
    ok(n == 7 && a.n_computed == 7 && a.n_draft == 0, "sched: prefill, no guesses (%d)", n);
    sched_seq_push(&a, 7); /* the sampled token: now "5 6 7" */
    n = sched_plan(&s);
    const struct sched_plan *p = &s.plan;
    ok(n == 4 && a.n_draft == 3 && p->n_items == 1 && p->items[0].n_rows == 4 &&
           p->items[0].n_draft == 3 && p->items[0].first_row_pos == 7,
       "sched: a decode with 3 guesses: 4 tokens, 4 rows from position 7 (%d tokens)", n);
    bool pos_ok = true;
    const int32_t want_tok[] = {7, 8, 9, 5};
    for (int i = 0; i < n && i < 4; i++)
        pos_ok &= p->pos[i] == 7 + i && p->want[i] == 1 && p->token[i] == want_tok[i];
    ok(pos_ok && a.tokens[8] == 8 && a.tokens[9] == 9 && a.tokens[10] == 5,
       "sched: guesses 8 9 5 at consecutive positions, logits for every row");
    ok(a.kv.n_blocks == 3, "sched: blocks for the guesses (%d)", a.kv.n_blocks);
    sched_commit(&s);
    ok(a.n_computed == 8, "sched: commit leaves the guesses uncomputed (%d)", a.n_computed);
    sched_seq_accept(&s, &a, 1); /* 8 right, 9 wrong */
    ok(a.n_tokens == 9 && a.n_computed == 9 && a.n_draft == 0 && a.kv.n_blocks == 3,
       "sched: one accepted: 9 tokens computed (%d/%d), blocks for the next token (%d)",
       a.n_tokens, a.n_computed, a.kv.n_blocks);
    ok(s.spec_drafts == 1 && s.spec_draft_tokens == 3 && s.spec_accepted == 1,
       "sched: counters 1 draft, 3 guesses, 1 accepted");
    sched_seq_push(&a, 4); /* no earlier "4": no guess */
    n = sched_plan(&s);
    ok(n == 1 && a.n_draft == 0, "sched: nothing to copy, a plain decode (%d)", n);
    sched_commit(&s);
    sched_remove(&s, &a);
    ok(kv_check(&kv, err, sizeof err) == 0 && kv.n_used == 0, "sched: pool consistent (%s)", err);

    /* Guesses never take the block another decode needs: a holds 2 blocks,
     * b 1, one is free; a's guesses would need it, and so does b's decode. */
    sched_seq_free(&a);
    sched_seq_init(&a, 3, 0);
    for (int i = 0; i < 7; i++) sched_seq_push(&a, ta[i]);
    a.n_prompt = 7;
    a.lookup_k = 3;
    int32_t tb[] = {1, 2, 3, 4};
    for (int i = 0; i < 4; i++) sched_seq_push(&b, tb[i]);
    b.n_prompt = 4;
    sched_add(&s, &a);
    sched_add(&s, &b);
    sched_plan(&s);
    sched_commit(&s);
    sched_seq_push(&a, 7);
    sched_seq_push(&b, 5); /* b needs its second block, the pool's last */
    sched_plan(&s);
    ok(a.n_draft == 0 && s.preemptions == 0 && b.kv.n_blocks == 2,
       "sched: no guess when its block is another decode's (guesses %d, preemptions %llu)",
       a.n_draft, (unsigned long long)s.preemptions);
    sched_commit(&s);
    sched_remove(&s, &a);
    sched_remove(&s, &b);
    ok(kv_check(&kv, err, sizeof err) == 0 && kv.n_used == 0, "sched: pool consistent after (%s)",
       err);
    sched_seq_free(&a);
    sched_seq_free(&b);
    sched_free(&s);
    kv_free(&kv);
}

static const char *PASSAGE =
    "The GNU General Public License is a free, copyleft license for software and other kinds "
    "of works. The licenses for most software and other practical works are designed to take "
    "away your freedom to share and change the works. By contrast, the GNU General Public "
    "License is intended to guarantee your freedom to share and change all versions of a "
    "program--to make sure it remains free software for all its users. We, the Free Software "
    "Foundation, use the GNU General Public License for most of our software; it applies also "
    "to any other work released this way by its authors. You can apply it to your programs, "
    "too. When we speak of free software, we are referring to freedom, not price. Our General "
    "Public Licenses are designed to make sure that you have the freedom to distribute copies "
    "of free software (and charge for them if you wish), that you receive source code or can "
    "get it if you want it, that you can change the software or use pieces of it in new free "
    "programs, and that you know you can do these things.";

int main(void)
{
    unit_lookup();
    unit_sched();
    const char *path = model_path();
    if (!path) return tap_bail("default model unavailable (packaging/fetch-model --print-path)");

    char edit[4096];
    snprintf(edit, sizeof edit,
             "Rewrite the following passage exactly, word for word, but replace the word "
             "\"software\" with \"code\":\n\n%s",
             PASSAGE);
    char code[2048];
    snprintf(code, sizeof code,
             "Repeat this C function twice, then explain it:\n\n"
             "static int sum(const int *a, int n)\n{\n    int s = 0;\n"
             "    for (int i = 0; i < n; i++) s += a[i];\n    return s;\n}\n");
    struct engine_message msgs[4][1] = {
        {{"user", edit}},
        {{"user", "Write a long story about a lighthouse keeper and a storm."}},
        {{"user", code}},
        {{"user", "List the numbers from 1 to 100, one per line, each with its square."}},
    };
    enum { NP = 4 };

    struct engine_config cfg;
    engine_config_default(&cfg);
    cfg.model_path = path;
    cfg.backend.kind = BACKEND_CPU;
    cfg.backend.threads = 1;
    cfg.n_ctx = 2048;
    cfg.lookup_k = 6;
    char err[512];
    struct engine *e = engine_open(&cfg, err, sizeof err);
    if (!e) return tap_bail("engine_open: %s", err);

    static struct res plain[NP], one[NP], many[NP];
    struct engine_request q[NP];
    spec_requests(q, msgs, NP, GEN);
    spec_plain(e, q, NP, plain, GEN);   /* the oracle: each prompt alone, guesses off */
    /* Batch 1 with lookup. */
    for (int i = 0; i < NP; i++) {
        run_many(e, &q[i], 1, &one[i]);
        const struct engine_metrics *m = &one[i].m;
        ok(same(&one[i], &plain[i]),
           "lookup, alone, prompt %d: identical (%d tokens; first diff %d)", i, one[i].n_tok,
           first_diff(&one[i], &plain[i]));
        tap_diag("prompt %d: %d steps with guesses, %d guessed, %d accepted (%.0f %%)", i,
                 m->n_spec_steps, m->n_draft_tokens, m->n_accepted_tokens,
                 m->n_draft_tokens ? 100.0 * m->n_accepted_tokens / m->n_draft_tokens : 0.0);
    }
    ok(one[0].m.n_accepted_tokens >= GEN / 4,
       "editing prompt: guesses accepted for at least a quarter of the reply (%d of %d tokens)",
       one[0].m.n_accepted_tokens, GEN);
    /* Several sequences in one batch. */
    run_many(e, q, NP, many);
    for (int i = 0; i < NP; i++)
        ok(same(&many[i], &plain[i]), "lookup, %d in a batch, prompt %d: identical (first diff %d)",
           NP, i, first_diff(&many[i], &plain[i]));
    /* Stop strings and max_tokens inside the accepted runs of the editing
     * reply: cut points k where tokens k - 1 and k came out of one step of
     * the lookup run (same event time). */
    const struct res *ref = &plain[0];
    int cuts[4], n_cuts = 0;
    for (int k = 40; k < GEN - 10 && n_cuts < 4; k++) {
        if (one[0].t[k - 1] != one[0].t[k] || one[0].t[k] != one[0].t[k + 1]) continue;
        cuts[n_cuts++] = k;
        k += 25;
    }
    ok(n_cuts >= 2, "editing reply: %d cut points inside accepted runs", n_cuts);
    for (int ci = 0; ci < n_cuts; ci++) {
        int k = cuts[ci];
        struct engine_request qs = q[0];
        qs.max_tokens = k;
        struct res r;
        run_many(e, &qs, 1, &r);
        ok(r.n_tok == k && r.st == ENGINE_LENGTH && memcmp(r.tok, ref->tok, (size_t)k * 4) == 0,
           "max_tokens %d: the reference's first %d tokens (%d)", k, k, r.n_tok);
        /* A stop string: 3 bytes straddling tokens k and k + 1, when they do. */
        size_t at = ref->end_of_tok[k] >= 2 ? ref->end_of_tok[k] - 2 : 0;
        char stop[8] = "";
        memcpy(stop, ref->text + at, 4);
        const char *first = strstr(ref->text, stop);
        size_t want = first ? (size_t)(first - ref->text) : 0;
        const char *stops[] = {stop};
        qs.max_tokens = GEN;
        qs.stop = stops;
        qs.n_stop = 1;
        run_many(e, &qs, 1, &r);
        ok(r.st == ENGINE_STOP && r.len == want && memcmp(r.text, ref->text, want) == 0,
           "stop string \"%s\" near token %d: the reference's text up to it (%zu bytes, want %zu)",
           stop, k, r.len, want);
    }
    /* Seeded sampling draws the same tokens with and without lookup. */
    for (int i = 0; i < 2; i++) {
        struct engine_request qt = q[i == 0 ? 0 : 2];
        engine_sampling_default(&qt.sampling);
        qt.sampling.temp = 0.7f;
        qt.sampling.seed = 1234 + (uint64_t)i;
        struct res a, b;
        qt.lookup_k = -1;
        run_many(e, &qt, 1, &a);
        qt.lookup_k = 0;
        run_many(e, &qt, 1, &b);
        ok(same(&a, &b) && a.n_tok == GEN,
           "sampled (temperature 0.7, seed %d): same draws (first diff %d, %d accepted)",
           1234 + i, first_diff(&a, &b), b.m.n_accepted_tokens);
    }
    struct engine_stats st;
    engine_snapshot(e, &st);
    ok(st.kv_used == 0 && st.kv_used + st.kv_cached + st.kv_free == st.kv_total,
       "KV pool: every block back (used %d, cached %d, free %d of %d)", st.kv_used, st.kv_cached,
       st.kv_free, st.kv_total);
    struct engine_info info;
    engine_info(e, &info);
    uint64_t per_tok = info.kv_bytes_per_token;
    engine_close(e);

    /* A small pool: the batch preempts and recomputes, guesses in flight. */
    cfg.backend.kv_bytes = (uint64_t)56 * 16 * per_tok;
    cfg.n_ctx = 0;
    e = engine_open(&cfg, err, sizeof err);
    if (!e) return tap_bail("engine_open (small pool): %s", err);
    run_many(e, q, 3, many);
    engine_snapshot(e, &st);
    int pre = 0;
    for (int i = 0; i < 3; i++) {
        pre += many[i].m.n_preempted;
        ok(same(&many[i], &plain[i]),
           "small pool, prompt %d: identical (first diff %d, preempted %d)", i,
           first_diff(&many[i], &plain[i]), many[i].m.n_preempted);
    }
    tap_diag("small pool: %d preemptions", pre);
    ok(st.kv_used == 0, "small pool: every block back (used %d)", st.kv_used);
    engine_close(e);
    return tap_done();
}
