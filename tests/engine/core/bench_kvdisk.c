/* bench_kvdisk: reopening a long conversation with the disk prefix cache
 * (issue 39's target: the first new token in <= 10 % of a cold prefill's
 * time). A session answers an N-token conversation (default 4,000 tokens of
 * ../shared/texts/gpl-3.0.txt) and closes, saving its prefix; then, in
 * interleaved rounds, a fresh engine gets the conversation plus a new
 * 24-token turn either cold (no cache) or with the cache (its prefix loaded
 * from disk), and the time to its first token is measured. Run by hand:
 *   build/tests/engine/core/bench_kvdisk [N] [threads] [rounds]
 * Figures go in docs/PERFORMANCE.md. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "engine_util.h"
#include "tok.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct engine *open_eng(const char *mpath, const char *dir, int threads, int32_t ctx)
{
    struct engine_config c;
    engine_config_default(&c);
    c.model_path = mpath;
    c.backend.kind = BACKEND_CPU;
    c.backend.threads = threads;
    c.n_ctx = ctx;
    c.kv_disk_dir = dir;
    c.kv_disk_log = stderr;
    char err[512];
    struct engine *e = engine_open(&c, err, sizeof err);
    if (!e) fprintf(stderr, "engine_open: %s\n", err);
    return e;
}

/* Seconds from submit to the first token; *cached: prompt tokens reused. */
static double ttft(struct engine *e, const int32_t *p, int32_t n, int32_t gen, int32_t *cached)
{
    struct engine_request q;
    memset(&q, 0, sizeof q);
    q.prompt_tokens = p;
    q.n_prompt_tokens = n;
    engine_sampling_greedy(&q.sampling);
    q.max_tokens = gen;
    q.ignore_eos = true;
    char err[256];
    enum engine_status why;
    double t0 = now_s(), first = -1;
    uint64_t id = engine_submit(e, &q, &why, err, sizeof err);
    if (!id) {
        fprintf(stderr, "submit: %s\n", err);
        return -1;
    }
    struct engine_event ev[16];
    for (;;) {
        engine_wait_events(e, id, 0.5);
        int k = engine_poll_request(e, id, ev, 16);
        bool fin = false;
        for (int i = 0; i < k; i++) {
            if (ev[i].type == ENGINE_EV_TOKEN && first < 0) first = now_s() - t0;
            if (ev[i].type == ENGINE_EV_FINISHED) {
                fin = true;
                if (ev[i].metrics) *cached = ev[i].metrics->n_cached;
            }
            engine_event_free(&ev[i]);
        }
        if (fin) return first;
    }
}

int main(int argc, char **argv)
{
    int32_t n = argc > 1 ? atoi(argv[1]) : 4000;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    static char mpath[4096];
    if (eu_model_path("smollm2", mpath, sizeof mpath) != 0) return 1;
    const char *shared = getenv("TERN_SHARED");
    char tpath[1024];
    snprintf(tpath, sizeof tpath, "%s/texts/gpl-3.0.txt", shared ? shared : "../shared");
    FILE *f = fopen(tpath, "rb");
    if (!f) return 1;
    static char text[1 << 16];
    size_t tl = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    char err[256];
    struct model *m = model_open(mpath, err, sizeof err);
    struct tok *tk = tok_open(m->gguf, err, sizeof err);
    static int32_t toks[1 << 15];
    int64_t nt = tok_encode(tk, text, tl, 0, toks, 1 << 15, err, sizeof err);
    tok_close(tk);
    model_close(m);
    if (nt < n + 24) {
        fprintf(stderr, "text too short: %lld tokens\n", (long long)nt);
        return 1;
    }
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/tern-bench-kvdisk-%ld", (long)getpid());
    mkdir(dir, 0700);
    const int32_t ctx = n + 256;

    /* The first session: the conversation answered, saved at close. */
    struct engine *e = open_eng(mpath, dir, threads, ctx);
    int32_t cached = 0;
    double t_first = ttft(e, toks, n, 8, &cached);
    double c0 = now_s();
    engine_close(e);
    double t_close = now_s() - c0;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "du -b %s/*.tkv | cut -f1", dir);
    FILE *p = popen(cmd, "r");
    long long bytes = 0;
    if (p) {
        if (fscanf(p, "%lld", &bytes) != 1) bytes = 0;
        pclose(p);
    }
    printf("session: %d tokens, first token %.3f s, close (save) %.3f s, entry %lld bytes (%.1f MiB)\n",
           n, t_first, t_close, bytes, (double)bytes / (1 << 20));

    /* Reopened: the conversation plus a new 24-token turn. */
    const int32_t n2 = n + 24;
    double sum_cold = 0, sum_warm = 0;
    for (int r = 0; r < rounds; r++) {
        for (int warm = 0; warm < 2; warm++) {
            e = open_eng(mpath, warm ? dir : NULL, threads, ctx);
            int32_t c = 0;
            double t = ttft(e, toks, n2, 1, &c);
            engine_close(e);
            printf("round %d %-5s TTFT %.3f s (%d prompt tokens, %d from the cache)\n", r + 1,
                   warm ? "warm" : "cold", t, n2, c);
            if (warm) sum_warm += t;
            else sum_cold += t;
        }
    }
    printf("mean cold %.3f s, warm %.3f s: %.1f %% of cold (%d thread%s)\n", sum_cold / rounds,
           sum_warm / rounds, 100.0 * sum_warm / sum_cold, threads, threads > 1 ? "s" : "");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return 0;
}
