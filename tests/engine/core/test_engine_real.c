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
#include "engine_util.h"
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
    static char buf[4096];
    return eu_model_path("smollm2", buf, sizeof buf) == 0 ? buf : NULL;
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

/* Collects one request's text (TOKEN fragments) and pieces per token. */
struct textres {
    char text[8192];
    size_t len;
    int32_t n_tok;
    size_t end_of_tok[512];      /* text length after each token's event */
    enum engine_status st;
    char msg[128];
};

static void run_text(struct engine *e, const struct engine_request *q, struct textres *out)
{
    char err[512];
    enum engine_status why;
    memset(out, 0, sizeof *out);
    uint64_t id = engine_submit(e, q, &why, err, sizeof err);
    if (!id) {
        tap_diag("submit: %s", err);
        return;
    }
    struct engine_event evs[32];
    for (bool done = false; !done;) {
        engine_wait_events(e, id, 1.0);
        int n = engine_poll_request(e, id, evs, 32);
        for (int i = 0; i < n; i++) {
            struct engine_event *ev = &evs[i];
            if (ev->type == ENGINE_EV_TOKEN && ev->text) {
                size_t l = strlen(ev->text);
                if (out->len + l < sizeof out->text) {
                    memcpy(out->text + out->len, ev->text, l + 1);
                    out->len += l;
                }
                if (ev->token >= 0 && out->n_tok < 512) out->end_of_tok[out->n_tok++] = out->len;
            }
            if (ev->type == ENGINE_EV_FINISHED) {
                done = true;
                out->st = ev->status;
                snprintf(out->msg, sizeof out->msg, "%s", ev->message ? ev->message : "");
            }
            engine_event_free(ev);
        }
    }
}

/* Stop strings (across token boundaries, never emitted) and EOS, with the
 * same request without a stop string as the oracle of the text. */
static void sc_text(struct fx *fx)
{
    struct engine_config cfg;
    engine_config_default(&cfg);
    struct engine *e = fx->open(fx, &cfg, 0);
    if (!ok(e != NULL, "text: open")) return;
    static struct textres full, cut, chat;
    struct engine_message msg = {"user", "Write one long sentence about the sea."};
    struct engine_request q = {.messages = &msg, .n_messages = 1, .max_tokens = 40,
                               .ignore_eos = true};
    engine_sampling_greedy(&q.sampling);
    run_text(e, &q, &full);
    ok(full.n_tok == 40 && full.len > 20, "reference reply: %d tokens, %zu bytes", full.n_tok,
       full.len);
    /* A stop string spanning tokens 10 and 11: last 2 bytes of 10, first 2 of 11. */
    int32_t k = 10;
    while (k < full.n_tok - 2 &&
           (full.end_of_tok[k] - full.end_of_tok[k - 1] < 2 ||
            full.end_of_tok[k + 1] - full.end_of_tok[k] < 2))
        k++;
    char stop[8] = "";
    memcpy(stop, full.text + full.end_of_tok[k] - 2, 4);
    const char *first = strstr(full.text, stop);
    size_t want = first ? (size_t)(first - full.text) : 0;
    const char *stops[] = {stop};
    q.stop = stops;
    q.n_stop = 1;
    run_text(e, &q, &cut);
    tap_diag("stop string \"%s\" spans tokens %d/%d", stop, k, k + 1);
    ok(cut.st == ENGINE_STOP && strcmp(cut.msg, "stop string") == 0, "status stop (stop string)");
    ok(cut.len == want && memcmp(cut.text, full.text, want) == 0,
       "text is the reference up to the stop string (%zu bytes, want %zu)", cut.len, want);
    ok(strstr(cut.text, stop) == NULL, "stop string never emitted");
    /* EOS: a chat reply ends on its own before max_tokens. */
    struct engine_message hi = {"user", "Say hi."};
    struct engine_request qe = {.messages = &hi, .n_messages = 1, .max_tokens = 200};
    engine_sampling_greedy(&qe.sampling);
    run_text(e, &qe, &chat);
    ok(chat.st == ENGINE_STOP && chat.n_tok < 200 && chat.len > 0,
       "chat reply stops at end-of-turn (%d tokens: \"%s\")", chat.n_tok, chat.text);
    ok(strstr(chat.text, "<|im_end|>") == NULL, "end-of-turn text not emitted");
    char err[256];
    int64_t nt = engine_count_chat_tokens(e, &hi, 1, err, sizeof err);
    ok(nt > 5, "chat token count (%lld)", (long long)nt);
    fx->close(fx, e);
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

    /* Sanitized builds run the model's kernels 20-50x slower (ThreadSanitizer
     * instruments every load of the matmuls): the same checks on fewer
     * tokens keep the program within its time limit. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    const int sanitized = 1;
#else
    const int sanitized = 0;
#endif
    if (sanitized) {
        fx.bi_len_step = 2;
        fx.gen = 4;
    }
    /* TERN_SCENARIO=name runs one scenario (while debugging). */
    const char *only = getenv("TERN_SCENARIO");
#define RUN(name, call) \
    if (!only || strcmp(only, name) == 0) call
    RUN("batch", sc_batch_invariance(&fx));
    RUN("prefix", sc_prefix_reuse(&fx, sanitized ? 48 : 200, 20));
    RUN("preempt", sc_preemption(&fx, 4, 47, 7)); /* 3 blocks each, growing to 4 */
    RUN("cancel", sc_cancel(&fx, sanitized ? 256 : 400));
    RUN("admission", sc_admission(&fx));
    RUN("priorities", sc_priorities(&fx, sanitized ? 192 : 2000, sanitized ? 32 : 64));
    RUN("displace", sc_displace(&fx));
    RUN("stall", sc_stall(&fx));
    RUN("metrics", sc_metrics(&fx));
    RUN("text", sc_text(&fx));

    free(ids);
    free(text);
    tok_close(rl.tok);
    model_close(rl.model);
    return tap_done();
}
