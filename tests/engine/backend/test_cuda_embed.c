/* test_cuda_embed: the CUDA backend's hidden-state rows (FWD_WANT_EMBD, the
 * rows embeddings pool) against the CPU backend's, on the CPU emulation of
 * tests/kernels/cuda/emu (the first LAYERS layers of the default model; on a GPU the
 * same program runs the real backend). A prompt forwarded with every row an
 * embedding row, then mixed with logits rows in one batch: the hidden states
 * agree with the CPU's (cosine >= 0.999 per row), and a mixed batch puts
 * each logits row and each hidden state in its own slot (equal to the same
 * rows asked alone).
 * usage: test_cuda_embed MODEL.gguf|--default-model [LAYERS] */
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

/* One forward of toks[0..n) (a fresh sequence) with the given want flags. */
static int fwd(struct backend *be, const int32_t *toks, int32_t n, const uint8_t *want,
               float *out, char *err, size_t errlen)
{
    int32_t pos[MAX_TOK], seq[MAX_TOK], table[MAX_TOK / BT];
    for (int32_t i = 0; i < n; i++) {
        pos[i] = i;
        seq[i] = 0;
    }
    for (int32_t i = 0; i < MAX_TOK / BT; i++) table[i] = i;
    struct fwd_seq fs = {table, MAX_TOK / BT};
    struct fwd_batch b = {n, toks, pos, seq, want, 1, &fs};
    return backend_forward(be, &b, out, err, errlen);
}

int main(int argc, char **argv)
{
    char err[1024], path[4096];
    if (argc < 2) return tap_bail("usage: test_cuda_embed MODEL.gguf|--default-model [LAYERS]");
    if (eu_model_arg(argv[1], path, sizeof path) != 0)
        return tap_bail("default model unavailable (packaging/fetch-model --print-path)");
    struct model *m = model_open(path, err, sizeof err);
    if (!m) return tap_bail("%s", err);
    if (argc > 2 && atoi(argv[2]) >= 1 && atoi(argv[2]) < m->hp.n_layer) m->hp.n_layer = atoi(argv[2]);
    struct tok *tk = tok_open(m->gguf, err, sizeof err);
    if (!tk) return tap_bail("%s", err);
    const char *text = "Embeddings are the final hidden states, pooled over the prompt.";
    int32_t toks[MAX_TOK];
    int64_t n = tok_encode(tk, text, strlen(text), TOK_ADD_BOS, toks, MAX_TOK, err, sizeof err);
    if (n < 4) return tap_bail("tokenize: %s", err);
    const int32_t nt = (int32_t)n, d = m->hp.dim, nv = m->hp.n_vocab;

    const uint64_t kv_tok = 2ull * m->hp.n_layer * m->hp.n_head_kv * m->hp.head_dim * 2;
    struct backend_config cfg = {.kind = BACKEND_CPU, .threads = 2, .kv_type = KV_F16,
                                 .kv_block_tokens = BT, .kv_bytes = kv_tok * 2 * MAX_TOK,
                                 .max_batch_tokens = MAX_TOK, .max_seqs = 2};
    struct backend *cpu = backend_cpu_open(m, &cfg, err, sizeof err);
    if (!cpu) return tap_bail("cpu backend: %s", err);
    cfg.kind = BACKEND_CUDA;
    struct backend *gpu = backend_cuda_open(m, &cfg, err, sizeof err);
    if (!gpu) return tap_bail("cuda backend: %s", err);
    ok(cpu->embd_rows && gpu->embd_rows, "both backends return hidden-state rows");

    float *hc = malloc((size_t)MAX_TOK * nv * 4), *hg = malloc((size_t)MAX_TOK * nv * 4);
    float *lg = malloc((size_t)MAX_TOK * nv * 4), *mx = malloc((size_t)MAX_TOK * nv * 4);
    uint8_t all_e[MAX_TOK], mix[MAX_TOK];
    for (int32_t i = 0; i < nt; i++) {
        all_e[i] = FWD_WANT_EMBD;
        mix[i] = i % 3 == 0 ? 1 : i % 3 == 1 ? FWD_WANT_EMBD : 0; /* logits, hidden, none */
    }
    if (fwd(cpu, toks, nt, all_e, hc, err, sizeof err) ||
        fwd(gpu, toks, nt, all_e, hg, err, sizeof err))
        return tap_bail("forward: %s", err);
    double worst = 1;
    for (int32_t i = 0; i < nt; i++)
        worst = fmin(worst, eu_cosine(hc + (size_t)i * nv, hg + (size_t)i * nv, d));
    ok(worst >= 0.999, "%d hidden-state rows: CUDA vs CPU cosine >= 0.999 (worst %.6f)", nt,
       worst);

    /* mixed: each row in its slot, equal to the same row asked without the
     * others (the logits rows: the same rows alone, so the same GEMM path) */
    uint8_t only_l[MAX_TOK];
    for (int32_t i = 0; i < nt; i++) only_l[i] = mix[i] == 1;
    if (fwd(gpu, toks, nt, only_l, lg, err, sizeof err) ||
        fwd(gpu, toks, nt, mix, mx, err, sizeof err))
        return tap_bail("forward: %s", err);
    double dl = 0, dh = 0;
    int32_t k = 0, kl = 0;
    for (int32_t i = 0; i < nt; i++) {
        if (!mix[i]) continue;
        const float *got = mx + (size_t)k++ * nv;
        const float *want = mix[i] == 1 ? lg + (size_t)kl++ * nv : hg + (size_t)i * nv;
        const int32_t w = mix[i] == 1 ? nv : d;
        for (int32_t j = 0; j < w; j++) {
            double e = fabs((double)got[j] - want[j]);
            if (mix[i] == 1) dl = fmax(dl, e);
            else dh = fmax(dh, e);
        }
    }
    ok(dl < 1e-4 && dh < 1e-5,
       "mixed batch (logits, hidden, none): logits rows as alone (max diff %.2e), hidden rows as "
       "alone (%.2e)", dl, dh);
    free(hc);
    free(hg);
    free(lg);
    free(mx);
    backend_close(gpu);
    backend_close(cpu);
    tok_close(tk);
    model_close(m);
    return tap_done();
}
