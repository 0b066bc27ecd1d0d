/* bench_serving: batching gain and scheduler overhead of the serving core.
 * Runs C concurrent greedy requests (each: a distinct prompt slice of
 * ../shared/texts/gpl-3.0.txt, then N generated tokens, EOS ignored) for
 * each C given, and prints the aggregate generation tokens/s, the gain over
 * C = 1, mean step time, tokens per step and the share of step time spent
 * outside the backend (scheduling, sampling, events). A benchmark, not a
 * test: run by hand, figures go to docs/SERVING.md.
 *
 * MODEL "fake" uses the zero-delay fake backend of the tests: then the step
 * time is the engine's own cost (planning, sampling a 64-token vocabulary,
 * events), the absolute scheduler overhead per step.
 *
 * usage: bench_serving MODEL|fake [-t THREADS] [-p PROMPT_TOKENS] [-n GEN_TOKENS]
 *                            [-s STEP_TOKENS] [C ...]   (default C: 1 8 32) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "fake_backend.h"
#include "model.h"
#include "tok.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int32_t *text_tokens(struct tok *t, int32_t *n_out)
{
    const char *shared = getenv("TERN_SHARED");
    char path[4096];
    snprintf(path, sizeof path, "%s/texts/gpl-3.0.txt", shared ? shared : "../shared");
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 17];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    char err[256];
    int64_t n = tok_encode(t, buf, len, 0, NULL, 0, err, sizeof err);
    int32_t *ids = n > 0 ? malloc((size_t)n * sizeof *ids) : NULL;
    if (ids) tok_encode(t, buf, len, 0, ids, n, err, sizeof err);
    *n_out = (int32_t)n;
    return ids;
}

struct run_result {
    double wall_s, gen_tok_s, step_ms, tokens_per_step, overhead, overhead_us, overhead_cpu;
    double cpu_us_per_token;     /* engine-thread CPU per computed token (1-thread backend) */
};

static int run_one(struct engine *e, const int32_t *ids, int32_t n_ids, int conc, int32_t prompt,
                   int32_t gen, struct run_result *out)
{
    struct engine_stats s0, s1;
    engine_snapshot(e, &s0);
    char err[512];
    double t0 = now_s();
    for (int i = 0; i < conc; i++) {
        struct engine_request q = {0};
        q.prompt_tokens = ids + (i * 211) % (n_ids - prompt);
        q.n_prompt_tokens = prompt;
        engine_sampling_greedy(&q.sampling);
        q.max_tokens = gen;
        q.ignore_eos = true;
        q.priority = ENGINE_PRIO_BATCH;
        enum engine_status why;
        if (!engine_submit(e, &q, &why, err, sizeof err)) {
            fprintf(stderr, "submit: %s\n", err);
            return -1;
        }
    }
    int done = 0;
    struct engine_event evs[256];
    while (done < conc) {
        engine_wait_events(e, 0, 1.0);
        int n = engine_poll_events(e, evs, 256);
        for (int i = 0; i < n; i++) {
            if (evs[i].type == ENGINE_EV_FINISHED) done++;
            engine_event_free(&evs[i]);
        }
    }
    out->wall_s = now_s() - t0;
    engine_snapshot(e, &s1);
    double busy = s1.busy_s - s0.busy_s, backend = s1.backend_s - s0.backend_s;
    uint64_t steps = s1.steps - s0.steps;
    out->gen_tok_s = (double)(s1.generated_tokens - s0.generated_tokens) / out->wall_s;
    out->step_ms = steps ? busy / (double)steps * 1e3 : 0;
    out->overhead = busy > 0 ? (busy - backend) / busy : 0;
    out->overhead_us = steps ? (busy - backend) / (double)steps * 1e6 : 0;
    double bc = s1.busy_cpu_s - s0.busy_cpu_s, bb = s1.backend_cpu_s - s0.backend_cpu_s;
    out->overhead_cpu = bc > 0 ? (bc - bb) / bc : 0;
    double computed = (double)((s1.prompt_tokens - s0.prompt_tokens) -
                               (s1.cached_tokens - s0.cached_tokens) +
                               (s1.generated_tokens - s0.generated_tokens));
    out->cpu_us_per_token = computed > 0 ? bc / computed * 1e6 : 0;
    out->tokens_per_step = steps ? (double)((s1.prompt_tokens - s0.prompt_tokens) -
                                            (s1.cached_tokens - s0.cached_tokens) +
                                            (s1.generated_tokens - s0.generated_tokens)) /
                                       (double)steps
                                 : 0;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_serving MODEL [-t N] [-p N] [-n N] [-s N] [C ...]\n");
        return 2;
    }
    int threads = 0, prompt = 64, gen = 64, step = 0, concs[16], n_conc = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-p") && i + 1 < argc) prompt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) gen = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) step = atoi(argv[++i]);
        else if (n_conc < 16) concs[n_conc++] = atoi(argv[i]);
    }
    if (!n_conc) {
        concs[0] = 1;
        concs[1] = 8;
        concs[2] = 32;
        n_conc = 3;
    }
    char err[512];
    bool fake = strcmp(argv[1], "fake") == 0;
    struct fake *fk = NULL;
    struct model *m = NULL;
    struct tok *t = NULL;
    int32_t n_ids = 0;
    int32_t *ids = NULL;
    if (fake) {
        fk = fake_open(4096, 16);
        n_ids = 1 << 16;
        ids = malloc((size_t)n_ids * sizeof *ids);
        for (int32_t i = 0; ids && i < n_ids; i++) ids[i] = 1 + (int32_t)((i * 2654435761u) >> 7) % 63;
    } else {
        m = model_open(argv[1], err, sizeof err);
        t = m ? tok_open(m->gguf, err, sizeof err) : NULL;
        if (!t) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        ids = text_tokens(t, &n_ids);
    }
    if (!ids || n_ids < prompt * 2) {
        fprintf(stderr, "cannot read the prompt text (set TERN_SHARED)\n");
        return 1;
    }
    struct engine_config cfg;
    engine_config_default(&cfg);
    cfg.parts.model = fake ? &fk->model : m;
    cfg.parts.tok = t;
    if (fake) cfg.parts.backend = &fk->be;
    cfg.backend.kind = BACKEND_CPU;
    cfg.backend.threads = threads;
    if (step) cfg.step_tokens = step;
    struct engine *e = engine_open(&cfg, err, sizeof err);
    if (!e) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    struct engine_info info;
    engine_info(e, &info);
    struct engine_stats st;
    engine_snapshot(e, &st);
    printf("# %s, %s, prompt %d, gen %d, step budget %d\n", argv[1], info.backend.device, prompt,
           gen, st.step_tokens_budget);
    printf("%6s %9s %10s %6s %9s %10s %9s %12s %9s %11s\n", "conc", "wall_s", "gen_tok/s", "gain",
           "step_ms", "tok/step", "overhead", "overhead_us", "ovh_cpu", "cpu_us/tok");
    double base = 0;
    for (int i = 0; i < n_conc; i++) {
        struct run_result r;
        if (run_one(e, ids, n_ids, concs[i], prompt, gen, &r) != 0) return 1;
        if (i == 0) base = r.gen_tok_s;
        printf("%6d %9.2f %10.1f %6.2f %9.2f %10.1f %8.2f%% %12.1f %8.2f%% %11.1f\n", concs[i],
               r.wall_s, r.gen_tok_s, base > 0 ? r.gen_tok_s / base : 0, r.step_ms,
               r.tokens_per_step, r.overhead * 100, r.overhead_us, r.overhead_cpu * 100,
               r.cpu_us_per_token);
        fflush(stdout);
    }
    engine_close(e);
    free(ids);
    if (t) tok_close(t);
    if (m) model_close(m);
    fake_free(fk);
    return 0;
}
