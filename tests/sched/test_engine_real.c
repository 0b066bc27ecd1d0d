/* test_engine_real: the serving-core scenarios (scenarios.h) on the real
 * default model (SmolLM2-135M-Instruct Q4_1, CPU backend): batch invariance
 * of greedy tokens, prefix reuse on a second turn, preemption with a small
 * pool, cancellation, admission control, priorities with chunked prefill,
 * a stalled consumer, metric consistency. Prompts are token slices of
 * ../shared/texts/gpl-3.0.txt. Fails (never skips) without the model or
 * the shared data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "scenarios.h"
#include "tok.h"

struct real {
    struct model *model;
    struct tok *tok;
    uint64_t kv_bytes_per_token;
};

static struct engine *real_open(struct fx *fx, struct engine_config *cfg, int32_t kv_blocks)
{
    struct real *rl = fx->ud;
    char err[512];
    cfg->parts.model = rl->model;
    cfg->parts.tok = rl->tok;
    cfg->backend.kind = BACKEND_CPU;
    cfg->backend.threads = 1; /* the suite runs tests in parallel on few cores */
    if (kv_blocks > 0) cfg->backend.kv_bytes = (uint64_t)kv_blocks * 16 * rl->kv_bytes_per_token;
    struct engine *e = engine_open(cfg, err, sizeof err);
    if (!e) tap_diag("engine_open: %s", err);
    return e;
}

static void real_close(struct fx *fx, struct engine *e)
{
    (void)fx;
    engine_close(e);
}

static char *model_path(void)
{
    const char *src = getenv("TERN_SRC");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/packaging/fetch-model --print-path", src ? src : ".");
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    static char buf[4096];
    char *got = fgets(buf, sizeof buf, p);
    int rc = pclose(p);
    if (!got || rc != 0) return NULL;
    buf[strcspn(buf, "\n")] = 0;
    return buf;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b) b[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

int main(void)
{
    char err[512];
    const char *path = model_path();
    if (!path) return tap_bail("default model unavailable (packaging/fetch-model --print-path)");
    const char *shared = getenv("TERN_SHARED");
    if (!shared) return tap_bail("TERN_SHARED not set");
    char tpath[4096];
    snprintf(tpath, sizeof tpath, "%s/texts/gpl-3.0.txt", shared);
    size_t tlen;
    char *text = slurp(tpath, &tlen);
    if (!text) return tap_bail("cannot read %s", tpath);

    struct real rl = {0};
    rl.model = model_open(path, err, sizeof err);
    if (!rl.model) return tap_bail("%s", err);
    rl.tok = tok_open(rl.model->gguf, err, sizeof err);
    if (!rl.tok) return tap_bail("%s", err);
    int64_t n = tok_encode(rl.tok, text, tlen, 0, NULL, 0, err, sizeof err);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (n < 6000 || !ids) return tap_bail("tokenizing %s: %s", tpath, err);
    tok_encode(rl.tok, text, tlen, 0, ids, n, err, sizeof err);

    struct fx fx = {.name = "smollm2", .open = real_open, .close = real_close, .text = ids,
                    .n_text = (int32_t)n, .gen = 8, .bi_len_step = 23, .timeout_s = 600, .ud = &rl};
    /* bytes per KV token, to size small pools */
    struct engine_config cfg;
    engine_config_default(&cfg);
    struct engine *e = real_open(&fx, &cfg, 0);
    if (!e) return tap_bail("cannot open the engine");
    struct engine_info info;
    engine_info(e, &info);
    rl.kv_bytes_per_token = info.kv_bytes_per_token;
    tap_diag("%s: %d KV blocks of %d tokens, %llu bytes per token; %s", info.model_name,
             info.kv_blocks, info.kv_block_tokens, (unsigned long long)info.kv_bytes_per_token,
             info.backend.device);
    real_close(&fx, e);

    /* Sanitized builds run the model 10-20x slower: shorter prompts (the
     * same checks, fewer tokens) keep the program within its time limit. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    const int sanitized = 1;
#else
    const int sanitized = 0;
#endif
    if (sanitized) fx.bi_len_step = 6;
    sc_batch_invariance(&fx);
    sc_prefix_reuse(&fx, sanitized ? 64 : 200, 20);
    sc_preemption(&fx, 4, 40, 7);
    sc_cancel(&fx, sanitized ? 192 : 400);
    sc_admission(&fx);
    sc_priorities(&fx, sanitized ? 320 : 2000, sanitized ? 32 : 64);
    sc_displace(&fx);
    sc_stall(&fx);
    sc_metrics(&fx);

    free(ids);
    free(text);
    tok_close(rl.tok);
    model_close(rl.model);
    return tap_done();
}
