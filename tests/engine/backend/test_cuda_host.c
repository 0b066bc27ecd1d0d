/* test_cuda_host: the CUDA backend's host-side logic on any machine (no GPU
 * needed): synthetic models against the real SmolLM2 file and the reference
 * dequantizer, the memory plan, graph buckets, batch checks, query tiles,
 * RoPE frequencies against the CPU kernel, and the fallback reason when no
 * GPU can be used. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "backend_cuda.h"
#include "cpu/ops.h"
#include "model.h"
#include "quant.h"
#include "synthetic.h"
#include "tap.h"
#include "tern_config.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static char *model_path(void)
{
    static char path[4096];
    char cmd[4200];
    const char *src = getenv("TERN_SRC");
    snprintf(cmd, sizeof cmd, "%s/packaging/fetch-model --print-path", src ? src : ".");
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    char *r = fgets(path, sizeof path, f);
    int rc = pclose(f);
    if (!r || rc != 0) return NULL;
    path[strcspn(path, "\n")] = 0;
    return path;
}

/* Synthetic smollm2-135m has the shapes of the real file. */
static void test_synthetic_shapes(void)
{
    char err[512];
    const char *path = model_path();
    if (!ok(path != NULL, "default model available (packaging/fetch-model)")) return;
    struct model *real = model_open(path, err, sizeof err);
    if (!ok(real != NULL, "real SmolLM2 opens: %s", real ? "" : err)) return;
    struct model *syn = model_open_synthetic("smollm2-135m", QT_Q4_0, 1, err, sizeof err);
    if (!ok(syn != NULL, "synthetic smollm2-135m opens: %s", syn ? "" : err)) {
        model_close(real);
        return;
    }
    const struct model_hparams *a = &syn->hp, *b = &real->hp;
    is_int(a->n_vocab, b->n_vocab, "n_vocab as the real model");
    is_int(a->dim, b->dim, "dim");
    is_int(a->n_layer, b->n_layer, "n_layer");
    is_int(a->n_head, b->n_head, "n_head");
    is_int(a->n_head_kv, b->n_head_kv, "n_head_kv");
    is_int(a->head_dim, b->head_dim, "head_dim");
    is_int(a->n_ff, b->n_ff, "n_ff");
    is_int(a->n_rot, b->n_rot, "n_rot");
    is_near(a->rope_base, b->rope_base, 1e-3, "rope_base");
    is_int(a->rope_neox, b->rope_neox, "rope style");
    is_int(syn->n_params, real->n_params, "parameter count");
    const struct wtensor *ts[] = { &syn->layers[3].wq, &syn->layers[3].wk, &syn->layers[3].w_down,
                                   &syn->output };
    const struct wtensor *tr[] = { &real->layers[3].wq, &real->layers[3].wk,
                                   &real->layers[3].w_down, &real->output };
    for (int i = 0; i < 4; i++) {
        ok(ts[i]->rows == tr[i]->rows && ts[i]->cols == tr[i]->cols,
           "%s shape %lldx%lld (real %lldx%lld)", tr[i]->name, (long long)ts[i]->rows,
           (long long)ts[i]->cols, (long long)tr[i]->rows, (long long)tr[i]->cols);
    }
    ok(syn->output.data == syn->tok_embd.data, "tied output like the real model");
    model_close(syn);
    model_close(real);
}

/* Generated blocks decode (reference dequantizer) to finite values with the
 * spread of a trained model, for every format the generator makes. */
static void test_synthetic_values(void)
{
    const uint32_t types[] = { QT_F32,  QT_F16,  QT_BF16, QT_Q4_0, QT_Q4_1,   QT_Q5_0,  QT_Q5_1, QT_Q8_0,
                               QT_Q2_K, QT_Q3_K, QT_Q4_K, QT_Q6_K, QT_IQ4_NL, QT_IQ4_XS };
    enum { N = 64 * 256 };
    static uint8_t raw[N * 4];
    static float v[N];
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const uint32_t bb = synth_block_bytes(types[k]), be = synth_block_elems(types[k]);
        for (uint32_t b = 0; b < N / be; b++) synth_gen_block(9, 1234, b, types[k], false, raw + b * bb);
        bool dq = dequant_row(types[k], raw, v, N);
        double s = 0, s2 = 0;
        int finite = 1;
        for (int64_t i = 0; dq && i < N; i++) {
            finite &= isfinite(v[i]) != 0;
            s += v[i];
            s2 += (double)v[i] * v[i];
        }
        double mean = s / N, sd = sqrt(s2 / N - mean * mean);
        ok(dq && finite && sd > 0.01 && sd < 0.04 && fabs(mean) < 0.01,
           "%s generated weights: sd %.4f (0.01..0.04), mean %.5f, finite %d", qtype_name(types[k]),
           sd, mean, finite);
    }
    char err[512];
    struct model *m = model_open_synthetic("smollm2-135m", QT_F16, 7, err, sizeof err);
    if (ok(m != NULL, "synthetic smollm2-135m f16 opens: %s", m ? "" : err)) {
        const float *norm = m->layers[1].attn_norm.data;
        ok(norm && norm[0] == 1.0f && norm[m->hp.dim - 1] == 1.0f, "norm weights are 1");
        model_close(m);
    }
    m = model_open_synthetic("smollm2-135m", QT_Q4_K, 7, err, sizeof err);
    ok(!m && strstr(err, "576") && strstr(err, "256"), "Q4_K refused for 576 columns: %s", err);
}

static void test_synthetic_identity(void)
{
    char err[512];
    struct synth_info si;
    struct model *a = model_open_synthetic("smollm2-135m", QT_Q8_0, 42, err, sizeof err);
    struct model *b = model_open_synthetic("smollm2-135m", QT_Q8_0, 42, err, sizeof err);
    struct model *c = model_open_synthetic("smollm2-135m", QT_Q8_0, 43, err, sizeof err);
    struct model *d = model_open_synthetic_ex("llama3-8b", QT_Q4_0, 42, SYNTH_NO_HOST_DATA, err,
                                              sizeof err);
    if (!ok(a && b && c && d, "synthetic models open: %s", err)) goto done;
    const struct wtensor *t = &a->layers[5].wv;
    size_t bytes = (size_t)t->rows * qtype_row_bytes(t->type, (uint64_t)t->cols);
    ok(memcmp(t->data, b->layers[5].wv.data, bytes) == 0, "same seed, same weights");
    ok(memcmp(t->data, c->layers[5].wv.data, bytes) != 0, "other seed, other weights");
    uint8_t blk[34];
    synth_gen_block(42, synth_tensor_id(5, SYNTH_L_WV), 17, QT_Q8_0, false, blk);
    ok(memcmp((const uint8_t *)t->data + 17 * 34, blk, 34) == 0,
       "block 17 of blk.5.attn_v is synth_gen_block(seed, id(5, WV), 17): the device can regenerate it");
    ok(synthetic_info(a, &si) && si.seed == 42 && si.host_data && si.tied, "synthetic_info of a host model");
    ok(synthetic_info(d, &si) && si.seed == 42 && !si.host_data && !si.tied,
       "synthetic_info of a shapes-only model");
    /* the CUDA module links its own copy of synthetic.c: a model made by the
     * binary has another owned_free there, and must still read as synthetic
     * (the first GPU trip's bench failed with "token_embd.weight has no data") */
    {
        struct model copy = *d;
        copy.owned_free = free;
        ok(synthetic_info(&copy, &si) && si.seed == 42 && !si.host_data,
           "synthetic_info does not depend on which copy of synthetic.c made the model");
    }
    ok(d->layers[0].wq.data == NULL && d->layers[0].wq.rows == 4096 && d->layers[31].w_down.cols == 14336,
       "shapes-only llama3-8b: no data, shapes present");
    ok(d->n_params > 7900000000ull && d->n_params < 8100000000ull, "llama3-8b has ~8.0e9 parameters (%llu)",
       (unsigned long long)d->n_params);
    struct model *bad = model_open_synthetic("nope", QT_Q4_0, 1, err, sizeof err);
    ok(!bad && strstr(err, "nope") && strstr(err, "llama3-8b"), "unknown name names the known ones: %s", err);
    bad = model_open_synthetic("llama3-8b", QT_Q8_1, 1, err, sizeof err);
    ok(!bad && strstr(err, "Q8_1"), "unsupported type named: %s", err);
done:
    model_close(a);
    model_close(b);
    model_close(c);
    model_close(d);
}

static uint64_t tensor_bytes(const struct wtensor *t)
{
    return t->rows * qtype_row_bytes(t->type, (uint64_t)t->cols);
}

static void test_plan(void)
{
    char err[1024];
    struct cuda_plan p;
    struct backend_config cfg = { .kind = BACKEND_CUDA, .kv_block_tokens = 16, .max_batch_tokens = 512,
                                  .max_seqs = 64 };
    struct model *m = model_open_synthetic_ex("llama3-8b", QT_Q4_0, 1, SYNTH_NO_HOST_DATA, err, sizeof err);
    if (!ok(m != NULL, "llama3-8b shapes: %s", m ? "" : err)) return;
    uint64_t raw = tensor_bytes(&m->tok_embd) + tensor_bytes(&m->output) + (uint64_t)m->hp.dim * 4;
    int n_t = 3;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const struct layer_weights *L = &m->layers[l];
        raw += tensor_bytes(&L->wq) + tensor_bytes(&L->wk) + tensor_bytes(&L->wv) + tensor_bytes(&L->wo) +
               tensor_bytes(&L->w_gate) + tensor_bytes(&L->w_up) + tensor_bytes(&L->w_down) +
               2ull * m->hp.dim * 4;
        n_t += 9;
    }
    const uint64_t free_b = (uint64_t)(140 * GIB), total_b = (uint64_t)(141 * GIB);
    int rc = cuda_plan_compute(m, &cfg, free_b, total_b, &p, err, sizeof err);
    if (!ok(rc == 0, "llama3-8b q4_0 plans on 140 GiB: %s", rc ? err : "")) goto done;
    ok(p.weight_bytes >= raw && p.weight_bytes <= raw + 256ull * n_t,
       "weights %llu = GGUF bytes %llu plus alignment", (unsigned long long)p.weight_bytes,
       (unsigned long long)raw);
    is_int(p.kv_bytes_per_token, 2ull * 32 * 8 * 128 * 2, "KV bytes per token: K+V, 32 layers, 8 heads, 128 dims, f16");
    ok(p.kv_bytes == (uint64_t)p.kv_n_blocks * 16 * p.kv_bytes_per_token, "KV pool is whole blocks");
    ok(p.weight_bytes + p.kv_bytes + p.workspace_bytes + p.reserve_bytes <= free_b, "plan fits in free memory");
    ok((int64_t)p.kv_n_blocks * 16 <= 64ll * 8192, "default KV no larger than max_seqs at full context");
    ok(p.max_blocks_per_seq * 16 >= m->hp.n_ctx_train, "block tables hold the training context");
    char line[512];
    cuda_plan_format(&p, line, sizeof line);
    ok(strstr(line, "weights 4.") && strstr(line, "KV") && strstr(line, "140.00 GiB free"), "plan line: %s", line);

    cfg.kv_bytes = (uint64_t)(200 * GIB);
    rc = cuda_plan_compute(m, &cfg, free_b, total_b, &p, err, sizeof err);
    ok(rc == -1 && strstr(err, "out of device memory") && strstr(err, "KV 200.00") && strstr(err, "weights 4."),
       "KV budget too large: %s", err);
    cfg.kv_bytes = 0;
    rc = cuda_plan_compute(m, &cfg, (uint64_t)(4 * GIB), (uint64_t)(4 * GIB), &p, err, sizeof err);
    ok(rc == -1 && strstr(err, "out of device memory"), "4 GiB device too small for 8B q4_0: %s", err);
    /* every type the kernels read plans (no CPU fallback): the low-bit
     * formats of downloaded GGUFs too, at their GGUF size */
    {
        const uint32_t gpu_types[] = { QT_Q2_K, QT_Q3_K, QT_IQ4_NL, QT_IQ4_XS };
        for (size_t k = 0; k < sizeof gpu_types / sizeof gpu_types[0]; k++) {
            struct model *mt = model_open_synthetic_ex("llama3-8b", gpu_types[k], 1, SYNTH_NO_HOST_DATA, err, sizeof err);
            if (!ok(mt != NULL, "llama3-8b %s shapes: %s", qtype_name(gpu_types[k]), mt ? "" : err)) continue;
            uint64_t wb = tensor_bytes(&mt->tok_embd) + tensor_bytes(&mt->output);
            for (int l = 0; l < mt->hp.n_layer; l++) wb += tensor_bytes(&mt->layers[l].w_down);
            struct cuda_plan pt;
            rc = cuda_plan_compute(mt, &cfg, free_b, total_b, &pt, err, sizeof err);
            ok(rc == 0 && pt.weight_bytes > wb && pt.weight_bytes < 4 * wb, "llama3-8b %s plans on the GPU: %s",
               qtype_name(gpu_types[k]), rc ? err : "");
            model_close(mt);
        }
        uint32_t block, bytes;
        ok(cuda_fmt(QT_IQ4_NL, &block, &bytes) && block == 32 && bytes == 18 && cuda_fmt(QT_IQ4_XS, &block, &bytes) &&
               block == 256 && bytes == 136 && cuda_fmt(QT_Q3_K, &block, &bytes) && bytes == 110 &&
               cuda_fmt(QT_Q2_K, &block, &bytes) && bytes == 84 && !cuda_fmt(QT_Q8_1, &block, &bytes),
           "cuda_fmt: GGUF block sizes of IQ4_NL, IQ4_XS, Q3_K, Q2_K; Q8_1 refused");
    }
    /* the quantized pools: the CPU backend's blocks, 34 and 18 bytes per 32 values */
    cfg.kv_type = KV_Q8_0;
    rc = cuda_plan_compute(m, &cfg, free_b, total_b, &p, err, sizeof err);
    ok(rc == 0 && p.kv_bytes_per_token == 2ull * 32 * 8 * (128 / 32) * 34 && p.kv_type == KV_Q8_0,
       "q8_0 KV plans: %llu bytes per token (%s)", (unsigned long long)p.kv_bytes_per_token, rc ? err : "");
    cuda_plan_format(&p, line, sizeof line);
    ok(strstr(line, "tokens, q8_0)") != NULL, "the plan line names the KV type: %s", line);
    cfg.kv_type = KV_Q4_0;
    rc = cuda_plan_compute(m, &cfg, free_b, total_b, &p, err, sizeof err);
    ok(rc == 0 && p.kv_bytes_per_token == 2ull * 32 * 8 * (128 / 32) * 18 && p.kv_type == KV_Q4_0,
       "q4_0 KV plans: %llu bytes per token (%s)", (unsigned long long)p.kv_bytes_per_token, rc ? err : "");
    cfg.kv_type = KV_F32;   /* no f32 KV store or attention on CUDA: named, and the way out */
    rc = cuda_plan_compute(m, &cfg, free_b, total_b, &p, err, sizeof err);
    ok(rc == -1 && strstr(err, "no f32 KV") && strstr(err, "--backend cpu"), "f32 KV refused: %s", err);
    is_int(cuda_kv_head_bytes(KV_Q8_0, 96), 102, "q8_0 head row of 96 values: 3 blocks of 34 bytes");
    is_int(cuda_kv_head_bytes(KV_Q4_0, 80), 0, "q4_0 head row of 80 values: not whole blocks, no pool");
    cfg.kv_type = KV_F16;
    m->hp.head_dim = 96;
    rc = cuda_plan_compute(m, &cfg, free_b, total_b, &p, err, sizeof err);
    ok(rc == -1 && strstr(err, "head_dim 96"), "head_dim 96 refused: %s", err);
done:
    model_close(m);
}

static void test_buckets(void)
{
    const int32_t n[] = { 0, 1, 2, 3, 5, 8, 9, 33, 64, 65, 512 };
    const int32_t want[] = { 0, 1, 2, 4, 8, 8, 16, 64, 64, 0, 0 };
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "graph bucket of %d tokens", n[i]);
        is_int(cuda_graph_bucket(n[i]), want[i], name);
    }
    is_int(cuda_attn_splits(1, 8, 0), 16, "batch 1, 8 KV heads: 16 key splits (cap)");
    is_int(cuda_attn_splits(4, 8, 0), 8, "batch 4, 8 KV heads: 8 splits (256 blocks)");
    is_int(cuda_attn_splits(64, 8, 0), 1, "batch 64: no split");
    is_int(cuda_attn_splits(1, 3, 0), 16, "batch 1, 3 KV heads: 16");
    is_int(cuda_attn_splits(1, 8, 32), 32, "batch 1, 8 KV heads, cap 32: 32 splits (256 blocks)");
    is_int(cuda_attn_splits(2, 8, 32), 16, "batch 2, cap 32: still 256 blocks at most (the workspace's bound)");
}

static void test_batch(void)
{
    char err[256];
    const int32_t tab0[] = { 5, 2, 9 }, tab1[] = { 0 };
    const struct fwd_seq seqs[] = { { tab0, 3 }, { tab1, 1 } };
    int32_t tok[] = { 1, 2, 3, 4, 5, 6, 7 }, pos[] = { 40, 41, 42, 43, 44, 3, 45 };
    int32_t seq[] = { 0, 0, 0, 0, 0, 1, 0 };
    struct fwd_batch b = { 7, tok, pos, seq, NULL, 2, seqs };
    is_int(cuda_batch_check(&b, 100, 16, 10, 512, 64, 100, err, sizeof err), 0, "valid batch passes");
    tok[2] = 100;
    ok(cuda_batch_check(&b, 100, 16, 10, 512, 64, 100, err, sizeof err) == -1 && strstr(err, "token 2"),
       "token id outside vocabulary: %s", err);
    tok[2] = 3;
    pos[5] = 16;
    ok(cuda_batch_check(&b, 100, 16, 10, 512, 64, 100, err, sizeof err) == -1 && strstr(err, "position 16"),
       "position past the block table: %s", err);
    pos[5] = 3;
    ok(cuda_batch_check(&b, 100, 16, 9, 512, 64, 100, err, sizeof err) == -1 && strstr(err, "block_table[2] = 9"),
       "block id outside the pool: %s", err);
    seq[1] = 2;
    ok(cuda_batch_check(&b, 100, 16, 10, 512, 64, 100, err, sizeof err) == -1 && strstr(err, "sequence 2"),
       "sequence index out of range: %s", err);
    seq[1] = 0;
    ok(cuda_batch_check(&b, 100, 16, 10, 4, 64, 100, err, sizeof err) == -1 && strstr(err, "7 tokens"),
       "too many tokens: %s", err);
    ok(cuda_batch_check(&b, 100, 16, 10, 512, 64, 2, err, sizeof err) == -1 && strstr(err, "3 blocks"),
       "table longer than the capacity: %s", err);

    int32_t tiles[14];
    int32_t nt = cuda_batch_tiles(&b, 3, tiles);
    const int32_t want[] = { 0, 3, 3, 2, 5, 1, 6, 1 };
    ok(nt == 4 && memcmp(tiles, want, sizeof want) == 0,
       "tiles of 3: {0,3} {3,2} {5,1} {6,1} (got %d: {%d,%d} {%d,%d} {%d,%d} {%d,%d})", nt, tiles[0],
       tiles[1], tiles[2], tiles[3], tiles[4], tiles[5], tiles[6], tiles[7]);
    nt = cuda_batch_tiles(&b, 1, tiles);
    is_int(nt, 7, "tiles of 1: one per token (decode)");
}

/* cos/sin of pos * inv_freq match the CPU kernel's RoPE cache. */
static void test_rope(void)
{
    const int32_t n_rot = 64;
    float inv[32], cs[64], fac[32];
    for (int i = 0; i < 32; i++) fac[i] = 1.0f + (float)i / 4.0f;
    const int32_t positions[] = { 1, 17, 1000 };
    for (int f = 0; f < 2; f++) {
        cuda_rope_freqs(n_rot, 100000.0f, f ? fac : NULL, inv);
        for (size_t k = 0; k < 3; k++) {
            int32_t p = positions[k];
            ops_rope_cache(cs, n_rot, p, 100000.0f, 1.0f, f ? fac : NULL);
            double worst = 0;
            for (int i = 0; i < 32; i++) {
                double a = (double)p * inv[i];
                worst = fmax(worst, fabs(cos(a) - cs[2 * i]));
                worst = fmax(worst, fabs(sin(a) - cs[2 * i + 1]));
            }
            ok(worst < 2e-3, "rope pos %d%s: cos/sin within %.2g of ops_rope_cache", p,
               f ? " with factors" : "", worst);
        }
    }
}

/* Without a GPU (or without CUDA) the backend refuses with a reason and
 * backend_open falls back to the CPU saying why. */
static void test_fallback(void)
{
    char err[512];
    struct model *m = model_open_synthetic("smollm2-135m", QT_Q8_0, 3, err, sizeof err);
    if (!ok(m != NULL, "synthetic model for the fallback: %s", m ? "" : err)) return;
    struct backend_config cfg = { .kind = BACKEND_AUTO, .threads = 1, .kv_block_tokens = 16,
                                  .kv_bytes = 16u << 20, .max_batch_tokens = 64, .max_seqs = 4 };
    const bool gpu = access("/dev/nvidia0", F_OK) == 0;
    err[0] = 0;
    struct backend *be = backend_cuda_open(m, &cfg, err, sizeof err);
    if (!TERN_HAVE_CUDA) {
        ok(!be, "built without CUDA: backend_cuda_open refuses");
        is_str(err, "built without CUDA", "reason says so");
    } else if (!gpu) {
        ok(!be, "no /dev/nvidia0: backend_cuda_open refuses");
        ok(strstr(err, "no CUDA device") || strstr(err, "CUDA driver not found") || strstr(err, "CUDA not usable"),
           "reason names the missing device or driver: %s", err);
    } else {
        ok(be != NULL, "GPU present: backend_cuda_open succeeds (%s)", be ? "" : err);
    }
    if (be) backend_close(be);
    char plan[512];
    int rc = backend_cuda_plan(m, &cfg, plan, sizeof plan);
    if (TERN_HAVE_CUDA && gpu)
        ok(rc == 0 && strstr(plan, "weights"), "plan on the GPU: %s", plan);
    else
        ok(rc == -1 && strncmp(plan, "no usable GPU: ", 15) == 0, "plan says no usable GPU: %s", plan);

    be = backend_open(m, &cfg, err, sizeof err);
    if (!ok(be != NULL, "backend_open(auto) gives a backend: %s", be ? "" : err)) goto done;
    struct backend_info info;
    be->ops->get_info(be, &info);
    if (TERN_HAVE_CUDA && gpu) {
        is_str(info.name, "cuda", "auto picks CUDA with a GPU");
    } else {
        is_str(info.name, "cpu", "auto falls back to the CPU");
        ok(strncmp(info.note, "no usable GPU: ", 15) == 0 && strstr(info.note, "; running on CPU"),
           "note: %s", info.note);
    }
    backend_close(be);
done:
    model_close(m);
}

int main(void)
{
    test_synthetic_shapes();
    test_synthetic_values();
    test_synthetic_identity();
    test_plan();
    test_buckets();
    test_batch();
    test_rope();
    test_fallback();
    return tap_done();
}
