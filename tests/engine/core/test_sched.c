/* test_sched: the batching policy on its own, step by step, without threads
 * or a backend: chunked prefill within the token budget, decodes first,
 * interactive before batch, preemption of the latest batch sequence when
 * blocks run out, prefix reuse at admission, block accounting. */
#include <stdlib.h>

#include "scheduler.h"
#include "tap.h"

static void seq_with_prompt(struct sched_seq *q, uint64_t id, int prio, int32_t n, int32_t base)
{
    sched_seq_init(q, id, prio);
    for (int32_t i = 0; i < n; i++) sched_seq_push(q, base + i);
    q->n_prompt = n;
}

/* Runs one step: plan, commit, and "sample" token 7 for sequences whose
 * known tokens are all computed. Returns the batch size. */
static int32_t step(struct sched *s)
{
    int32_t n = sched_plan(s);
    sched_commit(s);
    for (int32_t i = 0; i < s->plan.n_items; i++) {
        struct sched_seq *q = s->plan.items[i].seq;
        if (q->n_computed == q->n_tokens) sched_seq_push(q, 7);
    }
    return n;
}

static int32_t item_of(const struct sched *s, const struct sched_seq *q)
{
    for (int32_t i = 0; i < s->plan.n_items; i++)
        if (s->plan.items[i].seq == q) return i;
    return -1;
}

int main(void)
{
    char err[256];
    struct kv kv;
    struct sched s;
    struct sched_config cfg = {.step_tokens = 32, .max_running = 4, .max_logit_rows = 8};
    if (kv_init(&kv, 64, 16, err, sizeof err) || sched_init(&s, &kv, &cfg, err, sizeof err))
        return tap_bail("%s", err);

    /* Chunked prefill of a 100-token prompt: 32 + 32 + 32 + 4. */
    struct sched_seq a;
    seq_with_prompt(&a, 1, 1, 100, 1000);
    sched_add(&s, &a);
    int32_t sizes[4];
    for (int i = 0; i < 4; i++) sizes[i] = step(&s);
    ok(sizes[0] == 32 && sizes[1] == 32 && sizes[2] == 32 && sizes[3] == 4,
       "chunks 32/32/32/4 (got %d/%d/%d/%d)", sizes[0], sizes[1], sizes[2], sizes[3]);
    is_int(s.plan.n_rows, 1, "logits only for the last prompt token");
    is_int(a.n_tokens, 101, "first token appended after the prompt");
    is_int(a.kv.n_blocks, 7, "blocks for 100 tokens");
    is_int(kv.n_used, 7, "used blocks");
    is_int(step(&s), 1, "then one decode token per step");
    is_int(s.plan.items[0].start, 100, "decode at position 100");

    /* A batch prompt prefilling, then an interactive one: the interactive
     * chunk goes first, the decode is always in, the budget holds. */
    struct sched_seq b, c;
    seq_with_prompt(&b, 2, 1, 200, 2000);
    sched_add(&s, &b);
    step(&s);
    is_int(b.n_computed, 31, "batch prompt gets the budget left after the decode");
    seq_with_prompt(&c, 3, 0, 20, 3000);
    sched_add(&s, &c);
    int32_t n = step(&s);
    ok(n <= 32, "budget respected (%d)", n);
    int32_t ia = item_of(&s, &a), ib = item_of(&s, &b), ic = item_of(&s, &c);
    ok(ia >= 0 && ic >= 0 && s.plan.items[ic].n == 20, "decode and whole interactive prompt in");
    ok(ib < 0 || ib > ic, "batch chunk after the interactive one");
    is_int(ib >= 0 ? s.plan.items[ib].n : 0, 32 - 1 - 20, "batch gets the rest");

    /* Interactive admission at the running cap preempts the latest batch. */
    struct sched_seq d, e2;
    seq_with_prompt(&d, 4, 1, 10, 4000);
    sched_add(&s, &d);
    for (int k = 0; k < 20 && d.state != SCHED_RUNNING; k++) step(&s);
    is_int(s.n_running, 4, "cap of 4 running reached once the batch budget frees up");
    seq_with_prompt(&e2, 5, 0, 10, 5000);
    sched_add(&s, &e2);
    step(&s);
    ok(e2.state == SCHED_RUNNING && d.state == SCHED_WAITING && d.n_preempted == 1,
       "interactive admitted, latest batch preempted");
    is_int(d.kv.n_blocks, 0, "preempted sequence holds no blocks");
    is_int((long long)s.preemptions, 1, "preemption counted");

    /* Removing everything returns every block. */
    struct sched_seq *all[] = {&a, &b, &c, &d, &e2};
    for (int i = 0; i < 5; i++) sched_remove(&s, all[i]);
    is_int(kv.n_used, 0, "no block used after removal");
    is_int(s.n_running + s.n_waiting, 0, "no sequence left");

    /* Prefix reuse at admission: full blocks only, never the last token. */
    struct sched_seq f, g;
    seq_with_prompt(&f, 6, 0, 48, 9000);
    sched_add(&s, &f);
    while (f.n_computed < 48) step(&s);
    sched_remove(&s, &f);
    seq_with_prompt(&g, 7, 0, 40, 9000);
    sched_add(&s, &g);
    step(&s);
    is_int(g.n_cached, 32, "second prompt reuses 2 full blocks");
    is_int(s.plan.items[0].start, 32, "and prefills from position 32");

    /* Out of blocks during decode: the latest sequence is preempted. */
    sched_remove(&s, &g);
    sched_free(&s);
    kv_free(&kv);
    struct sched_config small = {.step_tokens = 64, .max_running = 4, .max_logit_rows = 8};
    kv_init(&kv, 4, 16, err, sizeof err);
    sched_init(&s, &kv, &small, err, sizeof err);
    struct sched_seq h, i2;
    seq_with_prompt(&h, 8, 1, 16, 100);
    seq_with_prompt(&i2, 9, 1, 16, 200);
    sched_add(&s, &h);
    sched_add(&s, &i2);
    step(&s); /* both prefill: 1 block each (+ watermark) */
    int32_t guard = 0;
    while (s.preemptions == 0 && guard++ < 100) step(&s);
    ok(s.preemptions == 1 && i2.state == SCHED_WAITING && h.state == SCHED_RUNNING,
       "pool exhausted: the later sequence is preempted (%d steps)", guard);
    char e3[256] = "";
    ok(kv_check(&kv, e3, sizeof e3) == 0, "kv consistent %s", e3);
    sched_remove(&s, &h);
    sched_remove(&s, &i2);
    is_int(kv.n_used, 0, "all blocks back");
    for (int k = 0; k < 5; k++) sched_seq_free(all[k]);
    sched_seq_free(&f);
    sched_seq_free(&g);
    sched_seq_free(&h);
    sched_seq_free(&i2);
    sched_free(&s);
    kv_free(&kv);
    return tap_done();
}
