/* test_cuda_e2e: CPU backend vs CUDA backend on a real-weights model (needs
 * a GPU; run by tests/gpu/check.sh with the cut SmolLM2 of
 * tests/gpu/make_small_model.py). Greedy generation from the same prompts
 * must agree for at least 32 tokens; teacher-forced top-1 agreement >= 99 %;
 * the CUDA backend must give the same tokens whether sequences decode alone
 * or together (graph buckets, padding) and whether a prompt is prefilled at
 * once or in chunks. usage: test_cuda_e2e MODEL.gguf [PROMPTS [TOKENS [LAYERS]]]
 * (fewer prompts, tokens and layers for the CPU emulation of tests/cuda/emu;
 * LAYERS runs only the first layers of the model, on both backends).
 * MODEL "--default-model" asks packaging/fetch-model for the default model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "model.h"
#include "tap.h"
#include "tok.h"

#define N_PROMPTS 12   /* at most; argv can ask for fewer */
#define N_GEN 40
static int np = N_PROMPTS, ng = N_GEN;
#define MAX_TOK 256
#define BT 16

static const char *prompts[N_PROMPTS] = {
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n    ",
    "The GNU General Public License is a free, copyleft license for",
    "List three colours: red,",
    "Water boils at a temperature of",
    "In 1969, the first humans to walk on the Moon were",
    "The quick brown fox",
    "Question: what is 12 times 12?\nAnswer:",
    "Photosynthesis is the process by which",
    "To be, or not to be,",
    "A good cup of tea needs",
};

struct seqs {
    int32_t ids[N_PROMPTS][MAX_TOK];
    int32_t len[N_PROMPTS];        /* prompt length */
    int32_t table[N_PROMPTS][MAX_TOK / BT];
    struct fwd_seq fs[N_PROMPTS];
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int32_t argmax(const float *v, int32_t n)
{
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

/* One forward of tokens [p0, p1) of sequence s (its positions), logits of all. */
static int fwd_range(struct backend *be, struct seqs *S, int s, int32_t p0, int32_t p1,
                     const int32_t *toks, float *logits, char *err, size_t errlen)
{
    int32_t n = p1 - p0, pos[MAX_TOK], seq[MAX_TOK];
    uint8_t want[MAX_TOK];
    for (int32_t i = 0; i < n; i++) {
        pos[i] = p0 + i;
        seq[i] = 0;
        want[i] = 1;
    }
    struct fwd_batch b = { n, toks + p0, pos, seq, want, 1, &S->fs[s] };
    return backend_forward(be, &b, logits, err, errlen);
}

/* Greedy: prefill each prompt alone, then decode all sequences one at a time
 * (batched = 0) or all in one forward per step (batched = 1). */
static int greedy(struct backend *be, struct seqs *S, int batched, int32_t out[N_PROMPTS][N_GEN],
                  double *decode_s, char *err, size_t errlen)
{
    const int32_t nv = be->model->hp.n_vocab;
    float *logits = malloc((size_t)MAX_TOK * nv * sizeof *logits);
    int32_t cur[N_PROMPTS][MAX_TOK];
    int rc = -1;
    for (int s = 0; s < np; s++) {
        memcpy(cur[s], S->ids[s], (size_t)S->len[s] * 4);
        if (fwd_range(be, S, s, 0, S->len[s], cur[s], logits, err, errlen)) goto done;
        out[s][0] = argmax(logits + (size_t)(S->len[s] - 1) * nv, nv);
        cur[s][S->len[s]] = out[s][0];
    }
    double t0 = now();
    for (int g = 1; g < ng; g++) {
        int32_t tok[N_PROMPTS], pos[N_PROMPTS], seq[N_PROMPTS];
        uint8_t want[N_PROMPTS];
        for (int s = 0; s < np; s++) {
            tok[s] = out[s][g - 1];
            pos[s] = S->len[s] + g - 1;
            seq[s] = s;
            want[s] = 1;
        }
        if (batched) {
            struct fwd_batch b = { np, tok, pos, seq, want, np, S->fs };
            if (backend_forward(be, &b, logits, err, errlen)) goto done;
            for (int s = 0; s < np; s++) out[s][g] = argmax(logits + (size_t)s * nv, nv);
        } else {
            for (int s = 0; s < np; s++) {
                int32_t z = 0;
                struct fwd_batch b = { 1, &tok[s], &pos[s], &z, want, 1, &S->fs[s] };
                if (backend_forward(be, &b, logits, err, errlen)) goto done;
                out[s][g] = argmax(logits, nv);
            }
        }
    }
    *decode_s = now() - t0;
    rc = 0;
done:
    free(logits);
    return rc;
}

/* Teacher-forced argmax of every position of prompt + tokens, in chunks. */
static int forced(struct backend *be, struct seqs *S, int s, const int32_t *gen, int chunk,
                  int32_t *top, float *last_logits, char *err, size_t errlen)
{
    const int32_t nv = be->model->hp.n_vocab, n = S->len[s] + ng;
    int32_t toks[MAX_TOK];
    memcpy(toks, S->ids[s], (size_t)S->len[s] * 4);
    memcpy(toks + S->len[s], gen, (size_t)ng * 4);
    float *logits = malloc((size_t)MAX_TOK * nv * sizeof *logits);
    int rc = 0;
    for (int32_t p0 = 0; p0 < n && rc == 0; p0 += chunk) {
        int32_t p1 = p0 + chunk < n ? p0 + chunk : n;
        rc = fwd_range(be, S, s, p0, p1, toks, logits, err, errlen);
        for (int32_t i = 0; rc == 0 && i < p1 - p0; i++) top[p0 + i] = argmax(logits + (size_t)i * nv, nv);
        if (rc == 0 && p1 == n) memcpy(last_logits, logits + (size_t)(p1 - p0 - 1) * nv, (size_t)nv * 4);
    }
    free(logits);
    return rc;
}

int main(int argc, char **argv)
{
    char err[1024];
    static struct seqs S;
    static int32_t g_cpu[N_PROMPTS][N_GEN], g_gpu[N_PROMPTS][N_GEN], g_gpu_b[N_PROMPTS][N_GEN];
    if (argc < 2) return tap_bail("usage: test_cuda_e2e MODEL.gguf [PROMPTS [TOKENS]]");
    if (argc > 2) np = atoi(argv[2]) < 1 ? 1 : atoi(argv[2]) > N_PROMPTS ? N_PROMPTS : atoi(argv[2]);
    if (argc > 3) ng = atoi(argv[3]) < 2 ? 2 : atoi(argv[3]) > N_GEN ? N_GEN : atoi(argv[3]);
    const int need = ng < 32 ? ng : 32; /* greedy agreement asked for */
    char path[4096];
    snprintf(path, sizeof path, "%s", argv[1]);
    if (strcmp(argv[1], "--default-model") == 0) {
        char cmd[4200];
        const char *src = getenv("TERN_SRC");
        snprintf(cmd, sizeof cmd, "%s/packaging/fetch-model --print-path", src ? src : ".");
        FILE *f = popen(cmd, "r");
        char *r = f ? fgets(path, sizeof path, f) : NULL;
        if (!f || pclose(f) != 0 || !r)
            return tap_bail("default model unavailable (packaging/fetch-model --print-path)");
        path[strcspn(path, "\n")] = 0;
    }
    struct model *m = model_open(path, err, sizeof err);
    if (!m) return tap_bail("%s", err);
    if (argc > 4 && atoi(argv[4]) >= 1 && atoi(argv[4]) < m->hp.n_layer) m->hp.n_layer = atoi(argv[4]);
    struct tok *tk = tok_open(m->gguf, err, sizeof err);
    if (!tk) return tap_bail("%s", err);
    tap_diag("model %s: %d layers, dim %d, vocab %d", path, m->hp.n_layer, m->hp.dim, m->hp.n_vocab);
    for (int s = 0; s < np; s++) {
        int64_t n = tok_encode(tk, prompts[s], strlen(prompts[s]), TOK_ADD_BOS,
                               S.ids[s], MAX_TOK - N_GEN - 1, err, sizeof err);
        if (n < 1 || n > MAX_TOK - N_GEN - 1) return tap_bail("tokenize prompt %d: %s", s, err);
        S.len[s] = (int32_t)n;
        for (int b = 0; b < MAX_TOK / BT; b++) S.table[s][b] = s * (MAX_TOK / BT) + b;
        S.fs[s].block_table = S.table[s];
        S.fs[s].n_blocks = MAX_TOK / BT;
    }
    const uint64_t kv_tok = 2ull * m->hp.n_layer * m->hp.n_head_kv * m->hp.head_dim * 2;
    struct backend_config cfg = { .kind = BACKEND_CPU, .threads = 8, .kv_type = KV_F16,
                                  .kv_block_tokens = BT, .kv_bytes = kv_tok * N_PROMPTS * MAX_TOK,
                                  .max_batch_tokens = MAX_TOK, .max_seqs = N_PROMPTS };
    struct backend *cpu = backend_cpu_open(m, &cfg, err, sizeof err);
    if (!cpu) return tap_bail("cpu backend: %s", err);
    cfg.kind = BACKEND_CUDA;
    struct backend *gpu = backend_cuda_open(m, &cfg, err, sizeof err);
    if (!gpu) return tap_bail("cuda backend: %s", err);
    struct backend_info info;
    gpu->ops->get_info(gpu, &info);
    tap_diag("cuda: %s, weights %.1f MiB, KV %.1f MiB, workspace %.1f MiB, %s", info.device,
             info.weight_bytes / 1048576.0, info.kv_bytes / 1048576.0,
             info.workspace_bytes / 1048576.0, info.note);
    ok(gpu->kv_n_blocks >= N_PROMPTS * MAX_TOK / BT && cpu->kv_n_blocks >= N_PROMPTS * MAX_TOK / BT,
       "both pools hold %d blocks (cpu %d, cuda %d)", N_PROMPTS * MAX_TOK / BT, cpu->kv_n_blocks,
       gpu->kv_n_blocks);

    double t_cpu = 0, t_gpu = 0, t_gpu_b = 0;
    if (greedy(cpu, &S, 0, g_cpu, &t_cpu, err, sizeof err)) return tap_bail("cpu greedy: %s", err);
    if (greedy(gpu, &S, 0, g_gpu, &t_gpu, err, sizeof err)) return tap_bail("cuda greedy: %s", err);
    if (greedy(gpu, &S, 1, g_gpu_b, &t_gpu_b, err, sizeof err))
        return tap_bail("cuda batched greedy: %s", err);
    tap_diag("decode %d x %d tokens: cpu %.3f s, cuda alone %.3f s (%.0f tok/s), cuda batched %.3f s (%.0f tok/s)",
             np, ng - 1, t_cpu, t_gpu, np * (ng - 1) / t_gpu, t_gpu_b, np * (ng - 1) / t_gpu_b);
    int min_same = ng;
    for (int s = 0; s < np; s++) {
        int same = 0;
        while (same < ng && g_cpu[s][same] == g_gpu[s][same]) same++;
        if (same < min_same) min_same = same;
        ok(same >= need, "prompt %d: greedy CPU and CUDA agree for %d tokens (>= %d)", s, same, need);
        ok(memcmp(g_gpu[s], g_gpu_b[s], (size_t)ng * 4) == 0,
           "prompt %d: CUDA tokens identical alone and in a batch of %d", s, np);
    }
    tap_diag("shortest greedy agreement: %d tokens", min_same);

    /* teacher forced on the CPU's continuation: one chunk, and chunks of 7 on CUDA */
    int agree = 0, total = 0, chunk_same = 0;
    double max_diff = 0;
    const int32_t nv = m->hp.n_vocab;
    float *lc = malloc((size_t)nv * 4), *lg = malloc((size_t)nv * 4);
    for (int s = 0; s < np; s++) {
        int32_t tc[MAX_TOK], tg[MAX_TOK], tg7[MAX_TOK];
        if (forced(cpu, &S, s, g_cpu[s], MAX_TOK, tc, lc, err, sizeof err) ||
            forced(gpu, &S, s, g_cpu[s], MAX_TOK, tg, lg, err, sizeof err) ||
            forced(gpu, &S, s, g_cpu[s], 7, tg7, lg, err, sizeof err))
            return tap_bail("teacher forcing prompt %d: %s", s, err);
        const int32_t n = S.len[s] + ng;
        for (int32_t i = 0; i < n; i++) {
            agree += tc[i] == tg[i];
            chunk_same += tg[i] == tg7[i];
        }
        total += n;
        for (int32_t v = 0; v < nv; v++) max_diff = fmax(max_diff, fabs(lc[v] - lg[v]));
    }
    ok(agree >= 0.99 * total, "teacher-forced top-1 agreement CPU vs CUDA %d/%d = %.2f %% (>= 99 %%)",
       agree, total, 100.0 * agree / total);
    ok(chunk_same >= 0.99 * total, "CUDA prefill at once vs in chunks of 7: %d/%d same top-1",
       chunk_same, total);
    tap_diag("largest |logit difference| CPU vs CUDA at the last position: %.4f", max_diff);

    /* a batch that breaks the pool bounds is refused, not run */
    int32_t bad_tab[1] = { gpu->kv_n_blocks };
    struct fwd_seq bs = { bad_tab, 1 };
    int32_t t0 = 1, p0 = 0, s0 = 0;
    uint8_t w0 = 1;
    struct fwd_batch bb = { 1, &t0, &p0, &s0, &w0, 1, &bs };
    ok(backend_forward(gpu, &bb, lc, err, sizeof err) == -1 && strstr(err, "outside the pool"),
       "block id outside the pool refused: %s", err);
    free(lc);
    free(lg);
    backend_close(gpu);
    backend_close(cpu);
    tok_close(tk);
    model_close(m);
    return tap_done();
}
