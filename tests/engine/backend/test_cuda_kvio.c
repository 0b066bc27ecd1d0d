/* test_cuda_kvio: the CUDA backend's kv_block_io, what the disk prompt cache
 * (engine/core/kvdisk.h, engine_cache.c) reads and writes KV blocks with.
 *
 * Per KV type (f16, q8_0, q4_0), on a real model cut to LAYERS layers:
 *  - layout: a prompt prefilled on the CPU and the CUDA backend into the
 *    same blocks; each block read out of both is the same size and, token
 *    row by token row (every layer's K then V, read in the CPU's layout: f16
 *    K transposed, attention.h), dequantizes to the same values within the
 *    backends' own difference: the bytes are the CPU backend's, so a cache
 *    file's payload means the same on both (the cache's key still refuses
 *    another backend's files: test_cuda_kvdisk);
 *  - round trip: a block read out, the device blocks zeroed (the next
 *    token's logits change: the write lands where the forward reads), the
 *    bytes written back: the logits are bit-identical; written into other
 *    block ids under a table naming those: identical again;
 *  - the CPU backend's bytes written into the CUDA pool give the CUDA logits
 *    to within a tenth of what zeroed KV moves them;
 *  - out-of-range block ids are refused;
 *  - resume: a prompt prefilled in 16-token chunks and a greedy reply (the
 *    cold run); its blocks saved through kvdisk with kv_block_io, the backend
 *    closed; a fresh backend (every block zeroed first), the entry found by
 *    the prompt, loaded and written in, the rest of the prompt prefilled:
 *    restored tokens > 0 and the same greedy reply token for token.
 * On the CPU emulation of tests/kernels/cuda/emu (2 layers) or a GPU (the
 * trip: every layer of the cut model).
 * usage: test_cuda_kvio MODEL.gguf|--default-model [LAYERS [PROMPT_TOKENS]] */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "engine_util.h"
#include "kvdisk.h"
#include "model.h"
#include "quant.h"
#include "tap.h"
#include "tok.h"

#define BT 16
#define N_BLOCKS 8       /* the layout/round-trip pool */
#define REPLY 8

static const enum kv_type kts[] = { KV_F16, KV_Q8_0, KV_Q4_0 };
static const char *const ktn[] = { "f16", "q8_0", "q4_0" };
static const uint32_t kqt[] = { QT_F16, QT_Q8_0, QT_Q4_0 };

static struct backend *open_be(const struct model *m, enum backend_kind kind, enum kv_type kt,
                               int32_t n_blocks, char *err, size_t errlen)
{
    const uint64_t head = kt == KV_F16 ? (uint64_t)m->hp.head_dim * 2
                                       : (uint64_t)m->hp.head_dim / 32 * (kt == KV_Q8_0 ? 34 : 18);
    const uint64_t per_tok = 2ull * m->hp.n_layer * m->hp.n_head_kv * head;
    struct backend_config cfg = { .kind = kind, .threads = 2, .kv_type = kt, .kv_block_tokens = BT,
                                  .kv_bytes = per_tok * BT * (uint64_t)n_blocks,
                                  .max_batch_tokens = 64, .max_seqs = 2 };
    return kind == BACKEND_CPU ? backend_cpu_open(m, &cfg, err, errlen)
                               : backend_cuda_open(m, &cfg, err, errlen);
}

/* tokens[p0..p0+n) of the sequence with table, in chunks of chunk; the last row's logits. */
static int feed(struct backend *be, const int32_t *table, int32_t nb, const int32_t *tokens, int32_t n,
                int32_t p0, int32_t chunk, float *logits, char *err, size_t errlen)
{
    return eu_feed(be, table, nb, tokens, n, p0, chunk, 0, NULL, NULL, logits, err, errlen);
}

static bool same_bits(const float *a, const float *b, int32_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* Token t's n_kv * hd values out of one dequantized K or V run of a block,
 * in the CPU backend's layout (attention.h): f16 K [head][dim][slot], f16 V
 * [head][slot][dim], the quantized types token rows. */
static void token_row(const float *run, int32_t t, bool planar, bool is_k, int32_t nh, int32_t hd, float *out)
{
    for (int32_t h = 0; h < nh; h++)
        for (int32_t d = 0; d < hd; d++)
            out[h * hd + d] = !planar ? run[((size_t)t * nh + h) * hd + d]
                              : is_k  ? run[((size_t)h * hd + d) * BT + t]
                                      : run[((size_t)h * BT + t) * hd + d];
}

/* The worst cosine between the two blocks' token rows (every layer's K and V
 * run, the first `rows` slots of each). */
static double rows_cosine(const uint8_t *a, const uint8_t *b, int32_t runs, int32_t rows, size_t row_bytes,
                          int ti, const struct model_hparams *hp, float *ra, float *rb)
{
    const int32_t nh = hp->n_head_kv, hd = hp->head_dim, n_val = nh * hd;
    float *fa = malloc((size_t)n_val * 4), *fb = malloc((size_t)n_val * 4);
    double worst = fa && fb ? 1 : -3;
    for (int32_t r = 0; worst > -2 && r < runs; r++) {
        const size_t off = (size_t)r * BT * row_bytes;
        if (!dequant_row(kqt[ti], a + off, ra, (int64_t)BT * n_val) ||
            !dequant_row(kqt[ti], b + off, rb, (int64_t)BT * n_val)) {
            worst = -2;
            break;
        }
        for (int32_t t = 0; t < rows; t++) {
            token_row(ra, t, kts[ti] == KV_F16, r % 2 == 0, nh, hd, fa);
            token_row(rb, t, kts[ti] == KV_F16, r % 2 == 0, nh, hd, fb);
            worst = fmin(worst, eu_cosine(fa, fb, n_val));
        }
    }
    free(fa);
    free(fb);
    return worst;
}

static void layout_and_round_trip(const struct model *m, const int32_t *toks, int ti)
{
    char err[1024];
    const int32_t nv = m->hp.n_vocab, L = m->hp.n_layer, n = 24; /* a full block and half of one */
    struct backend *cpu = open_be(m, BACKEND_CPU, kts[ti], N_BLOCKS, err, sizeof err);
    struct backend *gpu = cpu ? open_be(m, BACKEND_CUDA, kts[ti], N_BLOCKS, err, sizeof err) : NULL;
    if (!ok(gpu != NULL, "KV %s: CPU and CUDA backends open", ktn[ti])) {
        tap_diag("%s", err);
        backend_close(cpu);
        return;
    }
    ok(gpu->ops->kv_block_io != NULL && gpu->kv_bytes_per_token == cpu->kv_bytes_per_token &&
           gpu->kv_block_tokens == BT && gpu->kv_n_blocks == N_BLOCKS,
       "KV %s: the CUDA backend has kv_block_io, %llu bytes a token as the CPU's", ktn[ti],
       (unsigned long long)gpu->kv_bytes_per_token);
    const size_t bb = gpu->kv_bytes_per_token * BT, row = gpu->kv_bytes_per_token / (2u * (size_t)L);
    const int32_t n_val = BT * m->hp.n_head_kv * m->hp.head_dim; /* a run */
    uint8_t *c5 = malloc(bb), *c2 = malloc(bb), *g5 = malloc(bb), *g2 = malloc(bb), *zero = calloc(1, bb);
    float *l0 = malloc((size_t)nv * 4), *l1 = malloc((size_t)nv * 4), *l2 = malloc((size_t)nv * 4);
    float *fa = malloc((size_t)n_val * 4), *fb = malloc((size_t)n_val * 4);
    if (!c5 || !c2 || !g5 || !g2 || !zero || !l0 || !l1 || !l2 || !fa || !fb) {
        tap_bail("out of memory");
        exit(1);
    }
    const int32_t table[2] = { 5, 2 }, moved[2] = { 7, 1 };
    int rc = feed(cpu, table, 2, toks, n, 0, n, l0, err, sizeof err);
    rc = rc ? rc : feed(gpu, table, 2, toks, n, 0, n, l0, err, sizeof err);
    rc = rc ? rc : cpu->ops->kv_block_io(cpu, 5, c5, false) | cpu->ops->kv_block_io(cpu, 2, c2, false);
    rc = rc ? rc : gpu->ops->kv_block_io(gpu, 5, g5, false) | gpu->ops->kv_block_io(gpu, 2, g2, false);
    if (!ok(rc == 0, "KV %s: prompt of %d tokens into blocks {5, 2} on both, read back", ktn[ti], n)) {
        tap_diag("%s", err);
        goto done;
    }
    const double cos_full = rows_cosine(c5, g5, 2 * L, BT, row, ti, &m->hp, fa, fb);
    const double cos_half = rows_cosine(c2, g2, 2 * L, n - BT, row, ti, &m->hp, fa, fb);
    /* what the backends' own arithmetic leaves (the CPU's 8-bit activations,
     * deeper layers on a GPU; 4-bit steps apart for q4_0) against what
     * another layout gives: rows of unrelated values, cosine < 0.3 */
    const double lim = kts[ti] == KV_Q4_0 ? 0.95 : 0.99;
    ok(cos_full >= lim && cos_half >= lim,
       "KV %s: the CUDA block's bytes are the CPU's layout: every K/V row of every layer dequantizes to the "
       "CPU's (worst cosine %.6f full block, %.6f half block, >= %.3f)",
       ktn[ti], cos_full, cos_half, lim);

    /* the next token, from the prompt's KV */
    const int32_t next = toks[n];
    rc = feed(gpu, table, 2, &next, 1, n, 1, l0, err, sizeof err);
    rc = rc ? rc : gpu->ops->kv_block_io(gpu, 5, g5, false) | gpu->ops->kv_block_io(gpu, 2, g2, false);
    rc = rc ? rc : gpu->ops->kv_block_io(gpu, 5, zero, true) | gpu->ops->kv_block_io(gpu, 2, zero, true);
    rc = rc ? rc : feed(gpu, table, 2, &next, 1, n, 1, l1, err, sizeof err);
    double d_zero = 0;
    for (int32_t i = 0; i < nv; i++) d_zero = fmax(d_zero, fabs((double)l1[i] - l0[i]));
    const double cos_zero = eu_cosine(l0, l1, nv);
    ok(rc == 0 && d_zero > 1e-3, "KV %s: blocks zeroed through kv_block_io: the next logits move (max %.3g)",
       ktn[ti], d_zero);
    rc = gpu->ops->kv_block_io(gpu, 5, g5, true) | gpu->ops->kv_block_io(gpu, 2, g2, true);
    rc = rc ? rc : feed(gpu, table, 2, &next, 1, n, 1, l1, err, sizeof err);
    ok(rc == 0 && same_bits(l0, l1, nv), "KV %s: the bytes written back: bit-identical logits", ktn[ti]);
    rc = gpu->ops->kv_block_io(gpu, 7, g5, true) | gpu->ops->kv_block_io(gpu, 1, g2, true);
    rc = rc ? rc : feed(gpu, moved, 2, &next, 1, n, 1, l1, err, sizeof err);
    ok(rc == 0 && same_bits(l0, l1, nv),
       "KV %s: written into blocks {7, 1} and read from there: bit-identical logits", ktn[ti]);
    /* the CPU's bytes in the CUDA pool */
    rc = gpu->ops->kv_block_io(gpu, 5, c5, true) | gpu->ops->kv_block_io(gpu, 2, c2, true);
    rc = rc ? rc : feed(gpu, table, 2, &next, 1, n, 1, l2, err, sizeof err);
    const double cos_cpu = eu_cosine(l0, l2, nv);
    ok(rc == 0 && 1 - cos_cpu <= (1 - cos_zero) / 10,
       "KV %s: the CPU backend's bytes read by the CUDA kernels: logits 1 - cosine %.2e (zeroed KV: %.2e)",
       ktn[ti], 1 - cos_cpu, 1 - cos_zero);
    ok(gpu->ops->kv_block_io(gpu, -1, g5, false) == -1 && gpu->ops->kv_block_io(gpu, N_BLOCKS, g5, true) == -1,
       "KV %s: block ids -1 and %d (past the pool) refused", ktn[ti], N_BLOCKS);
done:
    backend_close(gpu);
    backend_close(cpu);
    free(c5), free(c2), free(g5), free(g2), free(zero), free(l0), free(l1), free(l2), free(fa), free(fb);
}

/* ---- resume through the disk cache's file ---------------------------------------- */

static int get_block(void *ud, int32_t k, void *buf)
{
    struct backend *be = ud;
    return be->ops->kv_block_io(be, k, buf, false); /* the table is 0..n-1 */
}

static int reply(struct backend *be, const int32_t *table, int32_t nb, const int32_t *prompt, int32_t np,
                 int32_t from, int32_t *out, char *err, size_t errlen)
{
    const int32_t nv = be->model->hp.n_vocab;
    float *lg = malloc((size_t)nv * 4);
    if (!lg) return -1;
    int rc = feed(be, table, nb, prompt + from, np - from, from, BT, lg, err, errlen);
    for (int32_t i = 0; rc == 0 && i < REPLY; i++) {
        out[i] = eu_argmax(lg, nv);
        if (i + 1 < REPLY) rc = feed(be, table, nb, &out[i], 1, np + i, 1, lg, err, errlen);
    }
    free(lg);
    return rc;
}

static void resume(const struct model *m, const char *path, const int32_t *prompt, int32_t np, int ti,
                   const char *dir)
{
    char err[1024];
    const int32_t nb = (np + REPLY + BT - 1) / BT;
    int32_t *table = malloc((size_t)nb * sizeof *table);
    for (int32_t i = 0; i < nb; i++) table[i] = i;
    struct backend *be = open_be(m, BACKEND_CUDA, kts[ti], nb, err, sizeof err);
    int32_t cold[REPLY], warm[REPLY];
    if (!ok(be && table && reply(be, table, nb, prompt, np, 0, cold, err, sizeof err) == 0,
            "resume, KV %s: cold run, %d prompt tokens in %d-token chunks, %d greedy tokens", ktn[ti], np, BT,
            REPLY)) {
        tap_diag("%s", err);
        backend_close(be);
        free(table);
        return;
    }
    /* engine_cache's identity: the model file, the backend and the KV shape */
    struct kvd_ident id = { .model = kvd_file_identity(path), .tok = 1, .kv_type = (uint32_t)kts[ti],
                            .block_tokens = BT, .block_bytes = be->kv_bytes_per_token * BT };
    id.layout = kvd_hash("cuda", 4, (uint64_t)m->hp.n_layer) ^ be->kv_bytes_per_token;
    struct kvd d;
    int rc = kvd_open(&d, dir, 1ull << 32, &id, NULL, err, sizeof err);
    rc = rc ? rc : kvd_save(&d, prompt, np / BT, "test_cuda_kvio", get_block, be, err, sizeof err);
    kvd_close(&d);
    backend_close(be);
    ok(rc == 0, "resume, KV %s: the prompt's %d whole blocks saved to %s", ktn[ti], np / BT, dir);
    if (rc) tap_diag("%s", err);

    be = open_be(m, BACKEND_CUDA, kts[ti], nb, err, sizeof err);
    void *zero = be ? calloc(1, id.block_bytes) : NULL, *blocks = NULL;
    for (int32_t i = 0; zero && i < nb; i++) be->ops->kv_block_io(be, i, zero, true);
    int32_t got = 0;
    rc = zero ? kvd_open(&d, dir, 1ull << 32, &id, NULL, err, sizeof err) : -1;
    const int32_t i = rc ? -1 : kvd_find(&d, prompt, np - 1, BT, &got);
    rc = i < 0 || kvd_load(&d, i, &blocks) != 0 ? -1 : 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int32_t k = 0; rc == 0 && k < got / BT; k++)
        rc = be->ops->kv_block_io(be, table[k], (char *)blocks + (size_t)k * id.block_bytes, true);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    tap_diag("  restore, KV %s: %d blocks of %llu bytes written in %.3f ms (%.2f GB/s)", ktn[ti], got / BT,
             (unsigned long long)id.block_bytes, s * 1e3,
             s > 0 ? (double)(got / BT) * (double)id.block_bytes / s * 1e-9 : 0.0);
    rc = rc ? rc : reply(be, table, nb, prompt, np, got, warm, err, sizeof err);
    ok(rc == 0 && got > 0 && got % BT == 0 && memcmp(cold, warm, sizeof cold) == 0,
       "resume, KV %s: a fresh backend restores %d of %d prompt tokens from the file, then the same %d greedy "
       "tokens",
       ktn[ti], got, np, REPLY);
    if (rc) tap_diag("%s", d.note[0] ? d.note : err);
    tap_diag("  cold %d %d %d %d ..., restored %d %d %d %d ...", cold[0], cold[1], cold[2], cold[3], warm[0],
             warm[1], warm[2], warm[3]);
    if (zero) kvd_close(&d);
    free(blocks);
    free(zero);
    backend_close(be);
    free(table);
}

int main(int argc, char **argv)
{
    char err[1024], path[4096];
    if (argc < 2) return tap_bail("usage: test_cuda_kvio MODEL.gguf|--default-model [LAYERS [PROMPT_TOKENS]]");
    if (eu_model_arg(argv[1], path, sizeof path) != 0)
        return tap_bail("default model unavailable (packaging/fetch-model --print-path)");
    struct model *m = model_open(path, err, sizeof err);
    if (!m) return tap_bail("%s", err);
    const int32_t n_layer = m->hp.n_layer;
    int32_t layers = argc > 2 ? atoi(argv[2]) : n_layer;
    if (layers < 1 || layers > n_layer) layers = n_layer;
    int32_t np = argc > 3 ? atoi(argv[3]) : 200;
    if (np < 2 * BT + 1 || np > 1000) np = 200;
    struct tok *tk = tok_open(m->gguf, err, sizeof err);
    if (!tk) return tap_bail("%s", err);
    static const char *const text[] = {
        "A long conversation reopened the next day should not pay for its whole prompt again. ",
        "The keys and values of every layer are saved block by block, sixteen positions each, ",
        "and written back into the pool of whichever blocks are free when the chat resumes. ",
        "Nothing about the answer may change: the same tokens, in the same order, every time. ",
    };
    static char buf[16384];
    size_t len = 0;
    for (int i = 0; len + 200 < sizeof buf && i < 120; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%d. %s", i, text[i % 4]);
    static int32_t toks[1024];
    int64_t nt = tok_encode(tk, buf, len, TOK_ADD_BOS, toks, 1024, err, sizeof err);
    if (nt < np + 1) return tap_bail("tokenize: %lld tokens (%s)", (long long)nt, err);
    m->hp.n_layer = layers;
    tap_diag("model %s: %d of %d layers, resume prompt %d tokens", path, layers, n_layer, np);

    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/tern-cuda-kvio-%ld", (long)getpid());
    mkdir(dir, 0700);
    for (int ti = 0; ti < 3; ti++) {
        layout_and_round_trip(m, toks, ti);
        resume(m, path, toks, np, ti, dir);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", dir);
    m->hp.n_layer = n_layer;
    tok_close(tk);
    model_close(m);
    return tap_done();
}
