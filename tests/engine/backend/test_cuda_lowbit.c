/* test_cuda_lowbit: the low-bit formats of downloaded GGUFs (IQ4_XS, IQ4_NL,
 * Q3_K, Q2_K) run on the CUDA backend, which before refused them (the model
 * then ran on the CPU): for each, the synthetic Llama-3.2-1B shape with its
 * matrices in that format (kernels/synth_gen.h), cut to its first LAYERS
 * layers, a prompt prefilled at once (the f16 copies and cuBLAS) then DECODE
 * tokens one at a time (the int8-activation matvec, captured as a graph),
 * every row asked as a hidden state; each row within the f16 comparison's
 * cosine >= 0.999 of the CPU backend's (test_cuda_kvq, test_cuda_embed).
 * The CPU quantizes its activations to 8 bits in blocks of 256 for these
 * formats, the GPU in blocks of 32 (decode) or not at all (prefill): the
 * rows are close, not equal (IQ4_NL, whose CPU activations are blocks of 32
 * too, agrees to 1e-6; IQ4_XS 0.9996 after one layer, 0.9992 after two);
 * the kernels themselves are exact against the reference dequantizer
 * (test_cuda_kernels).
 * On the CPU emulation of tests/kernels/cuda/emu (few layers) or a GPU.
 * usage: test_cuda_lowbit [LAYERS [DECODE]] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "engine_util.h"
#include "model.h"
#include "quant.h"
#include "synthetic.h"
#include "tap.h"

#define N_PROMPT 6
#define MAX_TOK 32
#define BT 16

/* Tokens [p0, p1) of one sequence, every row a hidden state. */
static int fwd(struct backend *be, const int32_t *toks, int32_t p0, int32_t p1, float *out, char *err,
               size_t errlen)
{
    return eu_fwd_hidden(be, toks, p0, p1, MAX_TOK / BT, out, err, errlen);
}

static int run(struct backend *be, const int32_t *toks, int32_t n, float *out, char *err, size_t errlen)
{
    const size_t nv = (size_t)be->model->hp.n_vocab;
    if (fwd(be, toks, 0, N_PROMPT, out, err, errlen)) return -1;
    for (int32_t p = N_PROMPT; p < n; p++)
        if (fwd(be, toks, p, p + 1, out + (size_t)p * nv, err, errlen)) return -1;
    return 0;
}

int main(int argc, char **argv)
{
    char err[1024];
    int32_t layers = argc > 1 ? atoi(argv[1]) : 2, n_dec = argc > 2 ? atoi(argv[2]) : 3;
    if (layers < 1 || layers > 16) layers = 2;
    if (n_dec < 1 || n_dec > MAX_TOK - N_PROMPT) n_dec = 3;
    const int32_t n = N_PROMPT + n_dec;
    static const uint32_t types[] = { QT_IQ4_XS, QT_IQ4_NL, QT_Q3_K, QT_Q2_K };
    float *hc = NULL, *hg = NULL;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        struct model *m = model_open_synthetic("llama3.2-1b", types[ti], 11, err, sizeof err);
        if (!m) return tap_bail("synthetic llama3.2-1b %s: %s", qtype_name(types[ti]), err);
        const int32_t n_layer = m->hp.n_layer, d = m->hp.dim, nv = m->hp.n_vocab;
        m->hp.n_layer = layers;
        if (!hc) {
            hc = malloc((size_t)MAX_TOK * nv * 4);
            hg = malloc((size_t)MAX_TOK * nv * 4);
            if (!hc || !hg) return tap_bail("out of memory");
        }
        int32_t toks[MAX_TOK];
        for (int32_t i = 0; i < n; i++) toks[i] = (int32_t)((1 + (uint32_t)i * 7919u) % (uint32_t)nv);
        const uint64_t kv_tok = 2ull * layers * m->hp.n_head_kv * m->hp.head_dim * 2;
        struct backend_config cfg = { .kind = BACKEND_CPU, .threads = 2, .kv_type = KV_F16, .kv_block_tokens = BT,
                                      .kv_bytes = kv_tok * 2 * MAX_TOK, .max_batch_tokens = MAX_TOK, .max_seqs = 2 };
        struct backend *cpu = backend_cpu_open(m, &cfg, err, sizeof err);
        if (!cpu) return tap_bail("cpu backend (%s): %s", qtype_name(types[ti]), err);
        cfg.kind = BACKEND_CUDA;
        struct backend *gpu = backend_cuda_open(m, &cfg, err, sizeof err);
        ok(gpu != NULL, "%s: the CUDA backend takes the model (no CPU fallback)%s%s", qtype_name(types[ti]),
           gpu ? "" : ": ", gpu ? "" : err);
        if (gpu) {
            if (run(cpu, toks, n, hc, err, sizeof err)) return tap_bail("cpu forward: %s", err);
            if (run(gpu, toks, n, hg, err, sizeof err)) return tap_bail("cuda forward: %s", err);
            double worst_p = 1, worst_d = 1;
            for (int32_t i = 0; i < n; i++) {
                const double c = eu_cosine(hc + (size_t)i * nv, hg + (size_t)i * nv, d);
                if (i < N_PROMPT) worst_p = fmin(worst_p, c);
                else worst_d = fmin(worst_d, c);
            }
            ok(worst_p >= 0.999 && worst_d >= 0.999,
               "%s, %d layer%s: hidden states CUDA vs CPU cosine >= 0.999 (worst: prefill %.6f, decode %.6f)",
               qtype_name(types[ti]), layers, layers > 1 ? "s" : "", worst_p, worst_d);
            backend_close(gpu);
        }
        backend_close(cpu);
        m->hp.n_layer = n_layer;
        model_close(m);
    }
    free(hc);
    free(hg);
    return tap_done();
}
