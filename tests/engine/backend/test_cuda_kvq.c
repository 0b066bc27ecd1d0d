/* test_cuda_kvq: the CUDA backend's quantized KV cache (q8_0, q4_0) against
 * the CPU backend with the same KV type, on a real model: for every depth
 * L = 1..LAYERS (the model cut to its first L layers on both sides), a
 * prompt prefilled at once (the flash prefill kernel) then DECODE tokens one
 * at a time (the decode kernels, captured as a graph), every row asked as a
 * hidden state (FWD_WANT_EMBD); each row within the tolerance the f16
 * comparison uses (test_cuda_embed: cosine >= 0.999), f16 run alongside as
 * the baseline. q4_0 past the first layer cannot keep to it: the backends'
 * activations differ by ~1 % (the CPU quantizes them to 8 bits, the GPU
 * keeps f16/f32), and a 4-bit step is 1/8 of a block's largest value, so a
 * few per cent of the K/V values land one whole step apart; that error is
 * of the size of 4-bit quantization's own, and grows with depth (the
 * kernels themselves agree with the CPU's on the same bytes:
 * test_cuda_kernels). There the limit is what q4_0 KV moves the CPU's own
 * hidden state (CPU q4_0 vs CPU f16) in the same run. Also: the pool is
 * sized for the type's blocks, and the type is honoured (the q4_0 rows are
 * not the f16 rows).
 * On the CPU emulation of tests/kernels/cuda/emu (few layers) or a GPU (the
 * trip: every layer of the cut model).
 * usage: test_cuda_kvq MODEL.gguf|--default-model [LAYERS [DECODE]] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "engine_util.h"
#include "model.h"
#include "tap.h"
#include "tok.h"

#define MAX_TOK 64
#define BT 16

/* Tokens [p0, p1) of one sequence, every row a hidden state. */
static int fwd(struct backend *be, const int32_t *toks, int32_t p0, int32_t p1, float *out, char *err,
               size_t errlen)
{
    return eu_fwd_hidden(be, toks, p0, p1, MAX_TOK / BT, out, err, errlen);
}

/* The prompt (n_prompt tokens) at once, then the rest of toks[0..n) a token
 * per forward: the hidden state of every position into out (n slots). */
static int run(struct backend *be, const int32_t *toks, int32_t n_prompt, int32_t n, float *out, char *err,
               size_t errlen)
{
    const size_t nv = (size_t)be->model->hp.n_vocab;
    if (fwd(be, toks, 0, n_prompt, out, err, errlen)) return -1;
    for (int32_t p = n_prompt; p < n; p++)
        if (fwd(be, toks, p, p + 1, out + (size_t)p * nv, err, errlen)) return -1;
    return 0;
}

int main(int argc, char **argv)
{
    char err[1024], path[4096];
    if (argc < 2) return tap_bail("usage: test_cuda_kvq MODEL.gguf|--default-model [LAYERS [DECODE]]");
    if (eu_model_arg(argv[1], path, sizeof path) != 0)
        return tap_bail("default model unavailable (packaging/fetch-model --print-path)");
    struct model *m = model_open(path, err, sizeof err);
    if (!m) return tap_bail("%s", err);
    const int32_t n_layer = m->hp.n_layer;
    int32_t layers = argc > 2 ? atoi(argv[2]) : n_layer;
    if (layers < 1 || layers > n_layer) layers = n_layer;
    int32_t n_dec = argc > 3 ? atoi(argv[3]) : 8;
    if (n_dec < 1 || n_dec > 24) n_dec = 8;
    struct tok *tk = tok_open(m->gguf, err, sizeof err);
    if (!tk) return tap_bail("%s", err);
    /* a prompt of ~14 tokens: the decode steps cross a 16-token block */
    const char *text = "The quantized KV cache keeps keys and values in blocks of thirty-two.";
    int32_t toks[MAX_TOK];
    int64_t np = tok_encode(tk, text, strlen(text), TOK_ADD_BOS, toks, MAX_TOK - 24, err, sizeof err);
    if (np < 4) return tap_bail("tokenize: %s", err);
    const int32_t n_prompt = (int32_t)np, n = n_prompt + n_dec, d = m->hp.dim, nv = m->hp.n_vocab;
    for (int32_t i = n_prompt; i < n; i++) toks[i] = toks[1 + (i * 7) % (n_prompt - 1)]; /* forced tokens */
    tap_diag("model %s: %d of %d layers, %d prompt + %d decoded tokens", path, layers, n_layer, n_prompt, n_dec);

    static const enum kv_type kts[] = { KV_F16, KV_Q8_0, KV_Q4_0 };
    static const char *const ktn[] = { "f16", "q8_0", "q4_0" };
    float *hc = malloc((size_t)MAX_TOK * nv * 4), *hg = malloc((size_t)MAX_TOK * nv * 4);
    float *h16 = malloc((size_t)MAX_TOK * nv * 4), *c16 = malloc((size_t)MAX_TOK * nv * 4);
    if (!hc || !hg || !h16 || !c16) return tap_bail("out of memory");
    for (int32_t L = 1; L <= layers; L++) {
        m->hp.n_layer = L;
        for (int ti = 0; ti < 3; ti++) {
            const uint64_t kv_tok = 2ull * L * m->hp.n_head_kv * m->hp.head_dim * 2; /* f16: enough for all */
            struct backend_config cfg = { .kind = BACKEND_CPU, .threads = 2, .kv_type = kts[ti],
                                          .kv_block_tokens = BT, .kv_bytes = kv_tok * 2 * MAX_TOK,
                                          .max_batch_tokens = MAX_TOK, .max_seqs = 2 };
            struct backend *cpu = backend_cpu_open(m, &cfg, err, sizeof err);
            if (!cpu) return tap_bail("cpu backend (KV %s): %s", ktn[ti], err);
            cfg.kind = BACKEND_CUDA;
            struct backend *gpu = backend_cuda_open(m, &cfg, err, sizeof err);
            if (!gpu) return tap_bail("cuda backend (KV %s): %s", ktn[ti], err);
            if (L == 1) {
                const uint64_t head = kts[ti] == KV_F16 ? (uint64_t)m->hp.head_dim * 2
                                      : (uint64_t)m->hp.head_dim / 32 * (kts[ti] == KV_Q8_0 ? 34 : 18);
                ok(gpu->kv_bytes_per_token == 2ull * L * m->hp.n_head_kv * head,
                   "KV %s: the CUDA pool takes %llu bytes per token (K and V, %d KV heads of %d)", ktn[ti],
                   (unsigned long long)gpu->kv_bytes_per_token, m->hp.n_head_kv, m->hp.head_dim);
            }
            if (run(cpu, toks, n_prompt, n, hc, err, sizeof err)) return tap_bail("cpu forward: %s", err);
            if (run(gpu, toks, n_prompt, n, hg, err, sizeof err)) return tap_bail("cuda forward: %s", err);
            double worst_p = 1, worst_d = 1, own = 1;
            int32_t at_p = 0, at_d = 0;
            for (int32_t i = 0; i < n; i++) {
                const double c = eu_cosine(hc + (size_t)i * nv, hg + (size_t)i * nv, d);
                if (i < n_prompt && c < worst_p) worst_p = c, at_p = i;
                if (i >= n_prompt && c < worst_d) worst_d = c, at_d = i;
                if (kts[ti] != KV_F16) own = fmin(own, eu_cosine(hc + (size_t)i * nv, c16 + (size_t)i * nv, d));
            }
            tap_diag("  worst rows: prefill position %d, decode position %d; CPU %s vs CPU f16 worst %.6f", at_p,
                     at_d, ktn[ti], own);
            if (kts[ti] != KV_Q4_0 || L == 1)
                ok(worst_p >= 0.999 && worst_d >= 0.999,
                   "%d layer%s, KV %s: hidden states CUDA vs CPU cosine >= 0.999 (worst: prefill %.6f, decode %.6f)",
                   L, L > 1 ? "s" : "", ktn[ti], worst_p, worst_d);
            else
                ok(1 - fmin(worst_p, worst_d) <= 1 - own,
                   "%d layers, KV q4_0: hidden states CUDA vs CPU 1 - cosine %.2e <= %.2e, what 4-bit KV "
                   "moves the CPU's own (worst: prefill %.6f, decode %.6f)",
                   L, 1 - fmin(worst_p, worst_d), 1 - own, worst_p, worst_d);
            if (kts[ti] == KV_F16) {
                memcpy(h16, hg, (size_t)n * nv * 4);
                memcpy(c16, hc, (size_t)n * nv * 4);
            } else if (kts[ti] == KV_Q4_0 && L == layers) {
                /* 4-bit keys move the rows past the prefill's first layer */
                double diff = 0;
                for (int32_t i = 1; i < n; i++)
                    for (int32_t j = 0; j < d; j++)
                        diff = fmax(diff, fabs((double)hg[(size_t)i * nv + j] - h16[(size_t)i * nv + j]));
                ok(diff > 1e-4, "KV q4_0 is honoured: its CUDA rows differ from the f16 ones (max %.3g)", diff);
            }
            backend_close(gpu);
            backend_close(cpu);
        }
    }
    m->hp.n_layer = n_layer;
    free(hc);
    free(hg);
    free(h16);
    free(c16);
    tok_close(tk);
    model_close(m);
    return tap_done();
}
