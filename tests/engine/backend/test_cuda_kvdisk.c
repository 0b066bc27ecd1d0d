/* test_cuda_kvdisk: the disk prompt cache (engine/core/engine_cache.c) with
 * the CUDA backend, through the real engine: the default model cut to
 * LAYERS layers, greedy, a PROMPT-token prompt prefilled in 16-token steps.
 *  - a session on the CUDA backend saves its prefix at close; the pool is
 *    zeroed; a new session restores it (n_restored > 0) and replies the
 *    same tokens as a run without the cache;
 *  - the cache's key holds the backend: a CPU session over the same
 *    directory ignores the CUDA entry with one line and replies as the CPU
 *    does without the cache; the CUDA session after it restores its own
 *    entry and not the CPU's (the same reply again).
 * On the CPU emulation of tests/kernels/cuda/emu, or a GPU.
 * usage: test_cuda_kvdisk MODEL.gguf|--default-model [LAYERS [PROMPT]] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "engine.h"
#include "engine_util.h"
#include "model.h"
#include "tap.h"
#include "tok.h"

#define BT 16
#define REPLY 6

struct res {
    int32_t tok[REPLY], n, n_cached, n_restored;
};

static int run1(struct engine *e, const int32_t *prompt, int32_t n, struct res *o)
{
    char err[256];
    enum engine_status why;
    struct engine_request q;
    memset(&q, 0, sizeof q);
    q.prompt_tokens = prompt;
    q.n_prompt_tokens = n;
    engine_sampling_greedy(&q.sampling);
    q.max_tokens = REPLY;
    q.ignore_eos = true;
    memset(o, 0, sizeof *o);
    uint64_t id = engine_submit(e, &q, &why, err, sizeof err);
    if (!id) {
        tap_diag("submit: %s", err);
        return -1;
    }
    struct engine_event evs[16];
    for (;;) {
        engine_wait_events(e, id, 0.1);
        int k = engine_poll_request(e, id, evs, 16);
        bool done = false;
        for (int j = 0; j < k; j++) {
            if (evs[j].type == ENGINE_EV_TOKEN && evs[j].token >= 0 && o->n < REPLY)
                o->tok[o->n++] = evs[j].token;
            if (evs[j].type == ENGINE_EV_FINISHED) {
                done = true;
                if (evs[j].metrics) {
                    o->n_cached = evs[j].metrics->n_cached;
                    o->n_restored = evs[j].metrics->n_restored;
                }
            }
            engine_event_free(&evs[j]);
        }
        if (done) return 0;
    }
}

static bool same(const struct res *a, const struct res *b)
{
    return a->n == REPLY && b->n == REPLY && memcmp(a->tok, b->tok, sizeof a->tok) == 0;
}

static const char *path;
static const struct model *model;
static struct tok *tk;

/* A session on be (borrowed), with the disk cache in dir (NULL: none). */
static int session(struct backend *be, const char *dir, FILE *log, const int32_t *prompt, int32_t n,
                   struct res *o)
{
    struct engine_config c;
    engine_config_default(&c);
    c.model_path = path; /* the cache's identity */
    c.parts.model = model;
    c.parts.tok = tk;
    c.parts.backend = be;
    c.backend.kind = strcmp(be->ops->name, "cuda") == 0 ? BACKEND_CUDA : BACKEND_CPU;
    c.backend.kv_type = KV_F16;
    c.step_tokens = BT; /* the cold run's last chunk is the restored run's */
    c.max_running = 2;
    c.n_ctx = 512;
    c.kv_disk_dir = dir;
    c.kv_disk_log = log;
    char err[512];
    struct engine *e = engine_open(&c, err, sizeof err);
    if (!e) {
        tap_diag("engine_open: %s", err);
        return -1;
    }
    int rc = run1(e, prompt, n, o);
    engine_close(e);
    return rc;
}

static int count_lines(FILE *f, char *buf, size_t cap)
{
    fflush(f);
    rewind(f);
    size_t k = fread(buf, 1, cap - 1, f);
    buf[k] = 0;
    int n = 0;
    for (size_t i = 0; i < k; i++) n += buf[i] == '\n';
    buf[strcspn(buf, "\n")] = 0; /* the first line, for the check's name */
    return n;
}

static void zero_pool(struct backend *be)
{
    void *z = calloc(1, be->kv_bytes_per_token * (uint64_t)be->kv_block_tokens);
    for (int32_t i = 0; z && i < be->kv_n_blocks; i++) be->ops->kv_block_io(be, i, z, true);
    free(z);
}

int main(int argc, char **argv)
{
    char err[1024], mpath[4096];
    if (argc < 2) return tap_bail("usage: test_cuda_kvdisk MODEL.gguf|--default-model [LAYERS [PROMPT]]");
    if (eu_model_arg(argv[1], mpath, sizeof mpath) != 0)
        return tap_bail("default model unavailable (packaging/fetch-model --print-path)");
    path = mpath;
    struct model *m = model_open(path, err, sizeof err);
    if (!m) return tap_bail("%s", err);
    const int32_t n_layer = m->hp.n_layer;
    int32_t layers = argc > 2 ? atoi(argv[2]) : n_layer;
    if (layers < 1 || layers > n_layer) layers = n_layer;
    int32_t np = argc > 3 ? atoi(argv[3]) : 160;
    if (np < 129 || np > 900) np = 160; /* the cache keeps prefixes of 128 tokens and more */
    tk = tok_open(m->gguf, err, sizeof err);
    if (!tk) return tap_bail("%s", err);
    static char text[16384];
    size_t len = 0;
    for (int i = 0; len + 200 < sizeof text && i < 100; i++)
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "Entry %d: the chat reopened tomorrow skips its prefill. ", i);
    static int32_t prompt[1024];
    int64_t nt = tok_encode(tk, text, len, TOK_ADD_BOS, prompt, 1024, err, sizeof err);
    if (nt < np) return tap_bail("tokenize: %lld tokens (%s)", (long long)nt, err);
    m->hp.n_layer = layers;
    model = m;
    tap_diag("model %s: %d of %d layers, prompt %d tokens", path, layers, n_layer, np);

    struct backend_config cfg = { .kind = BACKEND_CUDA, .threads = 2, .kv_type = KV_F16, .kv_block_tokens = BT,
                                  .kv_bytes = 2ull * layers * m->hp.n_head_kv * m->hp.head_dim * 2 * 640,
                                  .max_batch_tokens = 64, .max_seqs = 3 };
    struct backend *gpu = backend_cuda_open(m, &cfg, err, sizeof err);
    if (!gpu) return tap_bail("cuda backend: %s", err);
    cfg.kind = BACKEND_CPU;
    struct backend *cpu = backend_cpu_open(m, &cfg, err, sizeof err);
    if (!cpu) return tap_bail("cpu backend: %s", err);

    char dir[256], cmd[320];
    snprintf(dir, sizeof dir, "/tmp/tern-cuda-kvdisk-%ld", (long)getpid());
    mkdir(dir, 0700);
    struct res cold, r, cold_cpu;
    char lines[4096];
    int rc = session(gpu, NULL, NULL, prompt, np, &cold);
    ok(rc == 0 && cold.n == REPLY, "CUDA, no disk cache: %d greedy tokens (%d %d %d ...)", cold.n, cold.tok[0],
       cold.tok[1], cold.tok[2]);
    rc = session(gpu, dir, NULL, prompt, np, &r);
    ok(rc == 0 && same(&r, &cold) && r.n_restored == 0,
       "CUDA, first session with the cache: prefilled, the same reply, saved at close");
    zero_pool(gpu); /* what is restored must come from the file */
    FILE *log = tmpfile();
    rc = session(gpu, dir, log, prompt, np, &r);
    int nl = count_lines(log, lines, sizeof lines);
    fclose(log);
    ok(rc == 0 && same(&r, &cold) && r.n_restored >= 128 && r.n_cached >= r.n_restored && nl == 0,
       "CUDA, a new session: %d prompt tokens restored from disk (%d cached), the same %d greedy tokens",
       r.n_restored, r.n_cached, r.n);
    if (nl) tap_diag("log: %s", lines);

    rc = session(cpu, NULL, NULL, prompt, np, &cold_cpu);
    ok(rc == 0 && cold_cpu.n == REPLY, "CPU, no disk cache: %d greedy tokens", cold_cpu.n);
    log = tmpfile();
    rc = session(cpu, dir, log, prompt, np, &r);
    nl = count_lines(log, lines, sizeof lines);
    fclose(log);
    ok(rc == 0 && same(&r, &cold_cpu) && r.n_restored == 0 && r.n_cached == 0 && nl == 1 &&
           strstr(lines, "another backend"),
       "CPU over the CUDA session's cache: its entry ignored with one line, the CPU's own reply: %s", lines);
    zero_pool(gpu);
    log = tmpfile();
    rc = session(gpu, dir, log, prompt, np, &r);
    nl = count_lines(log, lines, sizeof lines);
    fclose(log);
    ok(rc == 0 && same(&r, &cold) && r.n_restored >= 128,
       "CUDA beside the CPU's entry: restores its own (%d tokens), the same reply", r.n_restored);
    if (nl) tap_diag("log: %s", lines);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", dir);
    backend_close(cpu);
    backend_close(gpu);
    m->hp.n_layer = n_layer;
    tok_close(tk);
    model_close(m);
    return tap_done();
}
