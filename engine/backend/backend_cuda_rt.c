/* backend_cuda_rt: the CUDA backend's runtime half (device memory, weight
 * upload, the layer loop, CUDA graphs, cuBLAS). Built as the module
 * libtern_cuda.so (TERN_CUDA_MODULE: entry points tern_cuda_module_open /
 * _plan, loaded by backend_cuda.c only when a CUDA driver is present), or
 * linked directly into the CPU-emulation tests (TERN_CUDA_EMU), where the
 * entry points keep their backend.h names. The plain-C planning and batch
 * logic it uses is in backend_cuda.c. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cuda.h"
#include "model.h"
#include "tern_config.h"

#if TERN_HAVE_CUDA || defined(TERN_CUDA_EMU)

#if defined(TERN_CUDA_MODULE)
#define CUDA_RT_OPEN tern_cuda_module_open
#define CUDA_RT_PLAN tern_cuda_module_plan
/* the module's two exports (the rest stays inside it) */
__attribute__((visibility("default"))) struct backend *
tern_cuda_module_open(const struct model *m, const struct backend_config *cfg, char *err,
                      size_t errlen);
__attribute__((visibility("default"))) int
tern_cuda_module_plan(const struct model *m, const struct backend_config *cfg, char *out,
                      size_t outlen);
#else
#define CUDA_RT_OPEN backend_cuda_open
#define CUDA_RT_PLAN backend_cuda_plan
#endif


#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cuda_ops.h"
#include "nvml.h"
#include "synthetic.h"
#include "quant.h"

/* Every CUDA call is checked; the message names the call and the reason. */
#define CU(call)                                                                          \
    do {                                                                                  \
        cudaError_t cu_e_ = (call);                                                       \
        if (cu_e_ != cudaSuccess) {                                                       \
            snprintf(err, errlen, "%s: %s (%s:%d)", #call, cudaGetErrorString(cu_e_),     \
                     __FILE__, __LINE__);                                                 \
            goto fail;                                                                    \
        }                                                                                 \
    } while (0)
#define CUBLAS(call)                                                                      \
    do {                                                                                  \
        cublasStatus_t cb_e_ = (call);                                                    \
        if (cb_e_ != CUBLAS_STATUS_SUCCESS) {                                             \
            snprintf(err, errlen, "%s: cuBLAS status %d (%s:%d)", #call, (int)cb_e_,      \
                     __FILE__, __LINE__);                                                 \
            goto fail;                                                                    \
        }                                                                                 \
    } while (0)

struct cu_layer {
    struct cu_tensor wq, wk, wv, wo, gate, up, down;
    const float *attn_norm, *ffn_norm, *bq, *bk, *bv, *q_norm, *k_norm, *post_attn, *post_ffn;
    bool swa;
    bool qkv_fused, glu_fused;      /* formats allow the one-launch decode kernels */
};

struct cuda_be {
    struct backend be;
    int dev;
    char dev_name[128];
    char runtime[64];          /* "runtime 13.0, driver 13.0" */
    cudaStream_t st;
    cublasHandle_t blas;
    struct cuda_plan plan;
    int32_t mv_max;                 /* largest batch on the matvec kernels */
    bool mv_q8;                     /* int8 activations for the matvecs (TERN_CUDA_MV_Q8=0: f32) */
    int32_t attn_split_cap;         /* decode attention's most key splits (TERN_CUDA_ATTN_SPLITS) */
    /* device memory */
    void *weights;                  /* one arena for all weights */
    uint64_t weights_used;
    void *h16;                      /* f16 copies of the quantized matrices (GEMM path), or NULL */
    uint64_t h16_bytes;
    void *kv;                       /* [n_layer][K, V][n_blocks][bt][n_kv][hd] f16, q8_0 or q4_0 */
    uint64_t kv_layer_bytes;        /* one of K or V of one layer */
    uint8_t *kvio_host;             /* kv_block_io's f16 staging block, or NULL */
    bool kvio_runs;                 /* kv_block_io a copy per run (TERN_CUDA_KVIO_RUNS=1: tests) */
    void *ws;                       /* workspace arena */
    struct cuda_ws wsz;
    float *x, *h, *q, *k, *v, *att, *o, *g, *u, *attn_ws, *rows, *logits;
    void *xh, *wtile, *blas_ws, *xq;
    int32_t *meta;                  /* device side of the batch description */
    float *freq_global, *freq_local;
    /* host */
    int32_t *meta_host;             /* pinned */
    float *logits_host;             /* pinned, CUDA_LOGIT_CHUNK rows */
    int32_t *out_slot;              /* [max_batch_tokens] place of each out_idx row */
    struct cu_tensor tok_embd, output;
    const float *output_norm;
    struct cu_layer *layers;
    cudaGraphExec_t graphs[8];      /* per bucket 1..64 */
    bool graphs_off;
    int32_t graph_nodes;            /* of the last graph captured (tern bench, the trip) */
    bool flash_ok;                  /* prefill attention kernel usable on this GPU */
    struct nvml *nvml;
};

/* Offsets (in int32) of the batch description in meta; fixed per backend so
 * captured graphs keep pointing at the right place. */
struct cu_meta {
    int32_t *token, *pos, *seq, *out_idx, *tiles, *table_off, *table_len, *tables;
};

static void cu_meta_at(const struct cuda_be *c, int32_t *base, struct cu_meta *mt)
{
    const int32_t T = c->plan.max_batch_tokens, S = c->plan.max_seqs;
    mt->token = base;
    mt->pos = base + T;
    mt->seq = base + 2 * T;
    mt->out_idx = base + 3 * T;
    mt->tiles = base + 4 * T;
    mt->table_off = base + 6 * T;
    mt->table_len = base + 6 * T + S;
    mt->tables = base + 6 * T + 2 * S;
}

/* ---- upload ---- */

/* Next piece of the weight arena; NULL (a broken invariant: the plan counted
 * fewer bytes than the upload takes) with err naming the tensor. */
static void *cu_take(struct cuda_be *c, uint64_t bytes, const struct wtensor *t, char *err,
                     size_t errlen)
{
    if (c->weights_used + al256(bytes) > c->plan.weight_bytes) {
        snprintf(err, errlen, "tensor %s: weight arena overflow (plan %llu bytes, need %llu more "
                 "after %llu)", t->name ? t->name : "?", (unsigned long long)c->plan.weight_bytes,
                 (unsigned long long)bytes, (unsigned long long)c->weights_used);
        return NULL;
    }
    void *p = (uint8_t *)c->weights + c->weights_used;
    c->weights_used += al256(bytes);
    return p;
}

/* A vector (norm, bias) as f32 on the device. */
static int cu_upload_vec(struct cuda_be *c, const struct wtensor *t, bool is_norm, uint32_t tid,
                         const struct synth_info *syn, const float **out, char *err, size_t errlen)
{
    float *host = NULL;
    *out = NULL;
    if (!cuda_present(t)) return 0;
    const uint64_t n = (uint64_t)t->rows * (uint64_t)t->cols;
    float *dst = cu_take(c, n * 4, t, err, errlen);
    if (!dst) return -1;
    if (!t->data) {
        if (!syn) {
            snprintf(err, errlen, "tensor %s has no data", t->name);
            return -1;
        }
        CU(cu_synth_gen(dst, syn->seed, tid, QT_F32, is_norm, 0, n, c->st));
    } else if (t->type == QT_F32) {
        CU(cudaMemcpy(dst, t->data, n * 4, cudaMemcpyHostToDevice));
    } else {
        host = malloc(n * 4);
        if (!host) {
            snprintf(err, errlen, "tensor %s: out of host memory", t->name);
            return -1;
        }
        if (!dequant_row(t->type, t->data, host, (int64_t)n)) {
            snprintf(err, errlen, "tensor %s: cannot convert type %s to f32", t->name,
                     qtype_name(t->type));
            goto fail;
        }
        CU(cudaMemcpy(dst, host, n * 4, cudaMemcpyHostToDevice));
        free(host);
    }
    *out = dst;
    return 0;
fail:
    free(host);
    return -1;
}

/* A matrix in its format (repacked when the kernels want the split layout).
 * Staged through wtile (16 MiB) in whole rows. */
static int cu_upload_mat(struct cuda_be *c, const struct wtensor *t, uint32_t tid,
                         const struct synth_info *syn, struct cu_tensor *out, char *err,
                         size_t errlen)
{
    uint32_t block = 1, bb = 1;
    cuda_fmt(t->type, &block, &bb);
    const size_t row_bytes = (size_t)(t->cols / block) * bb;
    const size_t bytes = row_bytes * (size_t)t->rows;
    out->type = t->type;
    out->layout = cu_layout_for(t->type);
    out->rows = t->rows;
    out->cols = t->cols;
    out->row_bytes = row_bytes;
    uint8_t *q = cu_take(c, bytes, t, err, errlen);
    if (!q) return -1;
    out->q = q;
    out->s = NULL;
    if (out->layout == CU_LAYOUT_SPLIT) {
        const size_t qbytes = (size_t)t->rows * (size_t)(t->cols / 32) * (t->type == QT_Q8_0 ? 32 : 16);
        out->s = q + qbytes; /* scales after the quants, inside the same bytes */
    }
    const size_t stage = c->wsz.wtile;
    int64_t chunk = (int64_t)(stage / row_bytes);
    if (chunk < 1) {
        snprintf(err, errlen, "tensor %s: a row of %zu bytes exceeds the staging buffer", t->name,
                 row_bytes);
        return -1;
    }
    for (int64_t r0 = 0; r0 < t->rows; r0 += chunk) {
        const int64_t nr = t->rows - r0 < chunk ? t->rows - r0 : chunk;
        const size_t off = (size_t)r0 * row_bytes, len = (size_t)nr * row_bytes;
        const bool direct = out->layout == CU_LAYOUT_GGUF;
        void *dst = direct ? (void *)(q + off) : c->wtile;
        if (t->data) {
            CU(cudaMemcpyAsync(dst, (const uint8_t *)t->data + off, len, cudaMemcpyHostToDevice, c->st));
        } else if (syn) {
            const uint32_t gb = synth_block_bytes(t->type);
            CU(cu_synth_gen(dst, syn->seed, tid, t->type, false, off / gb, len / gb, c->st));
        } else {
            snprintf(err, errlen, "tensor %s has no data", t->name);
            return -1;
        }
        if (!direct) CU(cu_repack(out, dst, r0, nr, c->st));
        /* the staging buffer is reused by the next chunk */
        if (!direct) CU(cudaStreamSynchronize(c->st));
    }
    CU(cudaStreamSynchronize(c->st));
    return 0;
fail:
    return -1;
}

static int cu_upload(struct cuda_be *c, const struct model *m, char *err, size_t errlen)
{
    struct synth_info si;
    const struct synth_info *syn = synthetic_info(m, &si) ? &si : NULL;
    const struct model_hparams *hp = &m->hp;
    if (cu_upload_mat(c, &m->tok_embd, synth_tensor_id(-1, SYNTH_T_TOK_EMBD), syn, &c->tok_embd, err, errlen))
        return -1;
    if (cuda_tied(m)) c->output = c->tok_embd;
    else if (cu_upload_mat(c, &m->output, synth_tensor_id(-1, SYNTH_T_OUTPUT), syn, &c->output, err, errlen))
        return -1;
    if (cu_upload_vec(c, &m->output_norm, true, synth_tensor_id(-1, SYNTH_T_OUTPUT_NORM), syn,
                      &c->output_norm, err, errlen))
        return -1;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const struct layer_weights *L = &m->layers[l];
        struct cu_layer *D = &c->layers[l];
        const struct { const struct wtensor *w; struct cu_tensor *d; int slot; } mats[] = {
            { &L->wq, &D->wq, SYNTH_L_WQ },       { &L->wk, &D->wk, SYNTH_L_WK },
            { &L->wv, &D->wv, SYNTH_L_WV },       { &L->wo, &D->wo, SYNTH_L_WO },
            { &L->w_gate, &D->gate, SYNTH_L_GATE }, { &L->w_up, &D->up, SYNTH_L_UP },
            { &L->w_down, &D->down, SYNTH_L_DOWN },
        };
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            if (cu_upload_mat(c, mats[i].w, synth_tensor_id(l, mats[i].slot), syn, mats[i].d, err, errlen))
                return -1;
        const struct { const struct wtensor *w; const float **d; bool norm; int slot; } vecs[] = {
            { &L->attn_norm, &D->attn_norm, true, SYNTH_L_ATTN_NORM },
            { &L->ffn_norm, &D->ffn_norm, true, SYNTH_L_FFN_NORM },
            { &L->bq, &D->bq, false, -1 },   { &L->bk, &D->bk, false, -1 },
            { &L->bv, &D->bv, false, -1 },   { &L->q_norm, &D->q_norm, true, -1 },
            { &L->k_norm, &D->k_norm, true, -1 },
            { &L->post_attn_norm, &D->post_attn, true, -1 },
            { &L->post_ffn_norm, &D->post_ffn, true, -1 },
        };
        for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) {
            uint32_t tid = vecs[i].slot >= 0 ? synth_tensor_id(l, vecs[i].slot) : 0;
            if (cu_upload_vec(c, vecs[i].w, vecs[i].norm, tid, syn, vecs[i].d, err, errlen)) return -1;
        }
        D->swa = model_layer_is_swa(m, l);
        D->qkv_fused = D->wq.type == D->wk.type && D->wk.type == D->wv.type &&
                       D->wq.cols == D->wk.cols && D->wk.cols == D->wv.cols &&
                       D->wq.rows % 2 == 0 && D->wk.rows % 2 == 0 && getenv("TERN_CUDA_NO_FUSE") == NULL;
        D->glu_fused = D->gate.type == D->up.type && D->gate.rows == D->up.rows &&
                       D->gate.cols == D->up.cols && getenv("TERN_CUDA_NO_FUSE") == NULL;
    }
    return 0;
}

/* ---- matmul: matvec for small batches, dequantized tiles + cuBLAS otherwise ---- */

/* The matvec path: count matrices stacked on one x (glu 0), or gate and up
 * with the activation in the epilogue (glu 1 SwiGLU, 2 GEGLU; y[0] out).
 * xq_ready: the kernel that wrote x also wrote it as int8 blocks into c->xq
 * (cu_add_rmsnorm_q8, cu_attn_decode_q8), so the q8 path skips quantizing. */
static int cu_mv(struct cuda_be *c, const struct cu_tensor *const *w, float *const *y, int32_t count,
                 int glu, const float *x, int32_t n, bool xq_ready, char *err, size_t errlen)
{
    if (c->mv_q8 && cu_matvec_q8_supported(w[0]->type)) {
        if (!xq_ready) CU(cu_quant_q8(x, n, w[0]->cols, c->xq, c->st));
        CU(cu_matvec_q8(w, y, count, glu, c->xq, n, c->st));
    } else if (glu) {
        CU(cu_matvec_glu(w[0], w[1], x, n, glu == 2, y[0], c->st));
    } else {
        CU(cu_matvec_multi(w, y, count, x, n, c->st));
    }
    return 0;
fail:
    return -1;
}

static int cu_mm(struct cuda_be *c, const struct cu_tensor *w, const float *x, int32_t n,
                 float *y, bool xq_ready, char *err, size_t errlen)
{
    if (n <= c->mv_max) return cu_mv(c, &w, &y, 1, 0, x, n, xq_ready, err, errlen);
    const float alpha = 1.0f, beta = 0.0f;
    const bool bf = w->type == QT_BF16;
    CU(cu_to_half(x, c->xh, (int64_t)n * w->cols, bf, c->st));
    /* half weights as stored, or the copy dequantized once at load (cu_f16_cache) */
    const void *wh = w->type == QT_F16 || bf ? w->q : w->h16;
    if (wh) {
        const cudaDataType_t dt = bf ? CUDA_R_16BF : CUDA_R_16F;
        CUBLAS(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->rows, n, (int)w->cols, &alpha,
                            wh, dt, (int)w->cols, c->xh, dt, (int)w->cols, &beta, y, CUDA_R_32F,
                            (int)w->rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return 0;
    }
    int64_t tile = (int64_t)(c->wsz.wtile / 2) / w->cols;
    if (tile >= 64) tile -= tile % 64; /* keeps y + r0 16-byte aligned for the tensor cores */
    for (int64_t r0 = 0; r0 < w->rows; r0 += tile) {
        const int64_t tr = w->rows - r0 < tile ? w->rows - r0 : tile;
        CU(cu_dequant_f16(w, r0, tr, c->wtile, c->st));
        CUBLAS(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)tr, n, (int)w->cols, &alpha,
                            c->wtile, CUDA_R_16F, (int)w->cols, c->xh, CUDA_R_16F, (int)w->cols,
                            &beta, y + r0, CUDA_R_32F, (int)w->rows, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
    }
    return 0;
fail:
    return -1;
}

/* The GEMM path (batches above mv_max, prefill) otherwise dequantizes every
 * quantized matrix to f16 tile by tile on every forward: for an 8B model that
 * is 15 GB of writes per step, which bounds batched decode and prefill. Where
 * the device has the room after weights, KV and workspace (the f16 copies plus
 * a margin of 1 GiB or 5 % of the device), each matrix is dequantized once
 * here and cuBLAS reads the copy; matvec (small batches) keeps reading the
 * quantized weights. TERN_CUDA_F16_CACHE=0 turns it off. */
/* Matrix i of the GEMM path: 7 per layer in order, then the output. */
static struct cu_tensor *cu_matrix(struct cuda_be *c, int32_t i)
{
    if (i >= 7 * c->be.model->hp.n_layer) return &c->output;
    struct cu_layer *L = &c->layers[i / 7];
    struct cu_tensor *m7[7] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down };
    return m7[i % 7];
}

static int cu_f16_cache(struct cuda_be *c, char *err, size_t errlen)
{
    const char *env = getenv("TERN_CUDA_F16_CACHE");
    if (env && strcmp(env, "0") == 0) return 0;
    const int32_t n = 7 * c->be.model->hp.n_layer + 1;
    uint64_t need = 0;
    for (int32_t i = 0; i < n; i++) {
        const struct cu_tensor *t = cu_matrix(c, i);
        if (t->q && t->type != QT_F16 && t->type != QT_BF16)
            need += al256((uint64_t)t->rows * (uint64_t)t->cols * 2);
    }
    size_t fr = 0, tot = 0;
    CU(cudaMemGetInfo(&fr, &tot));
    const uint64_t margin = (uint64_t)tot / 20 > (1ull << 30) ? (uint64_t)tot / 20 : (1ull << 30);
    if (need == 0 || (uint64_t)fr < need + margin) return 0;
    if (cudaMalloc(&c->h16, need) != cudaSuccess) {
        (void)cudaGetLastError();
        c->h16 = NULL;
        return 0;
    }
    c->h16_bytes = need;
    uint8_t *p = c->h16;
    for (int32_t i = 0; i < n; i++) {
        struct cu_tensor *t = cu_matrix(c, i);
        if (!t->q || t->type == QT_F16 || t->type == QT_BF16) continue;
        CU(cu_dequant_f16(t, 0, t->rows, p, c->st));
        t->h16 = p;
        p += al256((uint64_t)t->rows * (uint64_t)t->cols * 2);
    }
    CU(cudaStreamSynchronize(c->st));
    return 0;
fail:
    return -1;
}

/* ---- the layer loop ---- */

/* Runs all layers for n tokens whose description is already in c->meta.
 * prefill: attention over n_tiles query tiles; else decode attention. */
static int cu_layers(struct cuda_be *c, int32_t n, bool prefill, int32_t n_tiles, char *err,
                     size_t errlen)
{
    const struct model_hparams *hp = &c->be.model->hp;
    const int32_t hd = hp->head_dim, qd = hp->n_head * hd, kvd = hp->n_head_kv * hd;
    struct cu_meta mt;
    cu_meta_at(c, c->meta, &mt);
    const struct cu_attn_batch ab = { n, mt.pos, mt.seq, mt.table_off, mt.table_len, mt.tables };
    const float pos_scale = hp->rope_scale > 0 ? 1.0f / hp->rope_scale : 1.0f;
    const bool gelu = hp->arch == ARCH_GEMMA3;
    const int32_t splits = cuda_attn_splits(n, hp->n_head_kv, c->attn_split_cap);

    /* Decode on the q8 matvecs: the norms and the attention merge write their
     * output as int8 blocks too (c->xq), saving a quantize launch before each
     * of those matvecs; the matvec's xq_ready flag says whether c->xq holds
     * its x. Only the down projection's input (the GLU's) is quantized apart. */
    const bool q8 = c->mv_q8 && n <= c->mv_max && hp->dim % 32 == 0 && qd % 32 == 0;
    void *xq = q8 ? c->xq : NULL;

    CU(cu_embed(&c->tok_embd, mt.token, n, hp->embd_scale > 0 ? hp->embd_scale : 1.0f, c->x, c->st));
    CU(cu_add_rmsnorm_q8(c->x, NULL, c->layers[0].attn_norm, c->h, xq, n, hp->dim, hp->norm_eps, c->st));
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const struct cu_layer *L = &c->layers[l];
        const struct cu_attn_shape sh = { hp->n_head, hp->n_head_kv, hd,
                                          hp->n_rot > 0 ? hp->n_rot : hd, c->plan.kv_block_tokens,
                                          L->swa ? hp->sliding_window : 0,
                                          hp->query_scale > 0 ? hp->query_scale : 1.0f / sqrtf((float)hd),
                                          c->plan.kv_type == KV_Q8_0   ? CU_KV_Q8_0
                                          : c->plan.kv_type == KV_Q4_0 ? CU_KV_Q4_0
                                                                       : CU_KV_F16 };
        void *kc = (uint8_t *)c->kv + (size_t)(2 * l) * c->kv_layer_bytes;
        void *vc = (uint8_t *)c->kv + (size_t)(2 * l + 1) * c->kv_layer_bytes;
        if (n <= c->mv_max && L->qkv_fused) {
            /* decode: q, k and v in one launch (same x, same format) */
            const struct cu_tensor *w3[3] = { &L->wq, &L->wk, &L->wv };
            float *y3[3] = { c->q, c->k, c->v };
            if (cu_mv(c, w3, y3, 3, 0, c->h, n, q8, err, errlen)) return -1;
        } else if (cu_mm(c, &L->wq, c->h, n, c->q, q8, err, errlen) ||
                   cu_mm(c, &L->wk, c->h, n, c->k, q8, err, errlen) ||
                   cu_mm(c, &L->wv, c->h, n, c->v, q8, err, errlen)) {
            return -1;
        }
        if (L->bq) CU(cu_add_bias(c->q, L->bq, n, qd, c->st));
        if (L->bk) CU(cu_add_bias(c->k, L->bk, n, kvd, c->st));
        if (L->bv) CU(cu_add_bias(c->v, L->bv, n, kvd, c->st));
        if (L->q_norm) CU(cu_rmsnorm(c->q, L->q_norm, c->q, n * hp->n_head, hd, hp->norm_eps, c->st));
        if (L->k_norm) CU(cu_rmsnorm(c->k, L->k_norm, c->k, n * hp->n_head_kv, hd, hp->norm_eps, c->st));
        /* sliding-window layers (gemma3) rotate with their own base, unscaled */
        CU(cu_rope_store(c->q, c->k, c->v, &ab, &sh, L->swa ? c->freq_local : c->freq_global,
                         L->swa ? 1.0f : pos_scale, hp->rope_neox, kc, vc, c->st));
        if (prefill)
            CU(cu_attn_prefill(c->q, kc, vc, &ab, &sh, mt.tiles, n_tiles, c->att, c->st));
        else
            CU(cu_attn_decode_q8(c->q, kc, vc, &ab, &sh, splits, c->attn_ws, c->att, xq, c->st));
        if (cu_mm(c, &L->wo, c->att, n, c->o, q8 && !prefill, err, errlen)) return -1;
        if (L->post_attn) CU(cu_rmsnorm(c->o, L->post_attn, c->o, n, hp->dim, hp->norm_eps, c->st));
        CU(cu_add_rmsnorm_q8(c->x, c->o, L->ffn_norm, c->h, xq, n, hp->dim, hp->norm_eps, c->st));
        if (n <= c->mv_max && L->glu_fused) {
            /* decode: gate and up read together, activation in the epilogue */
            const struct cu_tensor *gu[2] = { &L->gate, &L->up };
            float *yg[1] = { c->g };
            if (cu_mv(c, gu, yg, 2, gelu ? 2 : 1, c->h, n, q8, err, errlen)) return -1;
        } else {
            if (cu_mm(c, &L->gate, c->h, n, c->g, q8, err, errlen) ||
                cu_mm(c, &L->up, c->h, n, c->u, q8, err, errlen))
                return -1;
            CU(cu_glu(c->g, c->u, c->g, n, hp->n_ff, gelu, c->st));
        }
        if (cu_mm(c, &L->down, c->g, n, c->o, false, err, errlen)) return -1;
        if (L->post_ffn) CU(cu_rmsnorm(c->o, L->post_ffn, c->o, n, hp->dim, hp->norm_eps, c->st));
        /* residual add fused with the next layer's attention norm */
        const float *next = l + 1 < hp->n_layer ? c->layers[l + 1].attn_norm : NULL;
        CU(cu_add_rmsnorm_q8(c->x, c->o, next, next ? c->h : NULL, next ? xq : NULL, n, hp->dim,
                             hp->norm_eps, c->st));
    }
    return 0;
fail:
    return -1;
}

/* Decode steps replay a graph captured once per bucket; a failed capture
 * turns graphs off for this backend (eager launches still work). */
static int cu_run_graph(struct cuda_be *c, int32_t bucket, char *err, size_t errlen)
{
    int idx = 0;
    while ((1 << idx) < bucket) idx++;
    if (!c->graphs[idx]) {
        cudaGraph_t g = NULL;
        CU(cudaStreamBeginCapture(c->st, cudaStreamCaptureModeThreadLocal));
        int rc = cu_layers(c, bucket, false, 0, err, errlen);
        cudaError_t e = cudaStreamEndCapture(c->st, &g);
        if (rc != 0 || e != cudaSuccess || !g ||
            cudaGraphInstantiate(&c->graphs[idx], g, 0) != cudaSuccess) {
            if (g) cudaGraphDestroy(g);
            c->graphs[idx] = NULL;
            (void)cudaGetLastError();
            c->graphs_off = true;
            return cu_layers(c, bucket, false, 0, err, errlen);
        }
        size_t nodes = 0;
        if (cudaGraphGetNodes(g, NULL, &nodes) == cudaSuccess) c->graph_nodes = (int32_t)nodes;
        cudaGraphDestroy(g);
    }
    CU(cudaGraphLaunch(c->graphs[idx], c->st));
    return 0;
fail:
    return -1;
}

static int cu_forward(struct backend *be, const struct fwd_batch *b, float *logits, char *err,
                      size_t errlen)
{
    struct cuda_be *c = be->impl;
    const struct model_hparams *hp = &be->model->hp;
    const struct cuda_plan *p = &c->plan;
    if (cuda_batch_check(b, hp->n_vocab, p->kv_block_tokens, p->kv_n_blocks, p->max_batch_tokens,
                         p->max_seqs, p->max_blocks_per_seq, err, errlen))
        return -1;
    CU(cudaSetDevice(c->dev));
    const int32_t n = b->n_tokens;
    struct cu_meta h;
    cu_meta_at(c, c->meta_host, &h);
    const int32_t max_tile = cu_attn_tile_tokens(hp->n_head, hp->n_head_kv);
    const int32_t n_tiles = cuda_batch_tiles(b, max_tile, h.tiles);
    const bool prefill = n_tiles < n && c->flash_ok;
    int32_t bucket = !prefill && !c->graphs_off ? cuda_graph_bucket(n) : 0;
    if (bucket > p->max_batch_tokens) bucket = 0; /* buffers hold max_batch_tokens rows */
    const int32_t np = bucket ? bucket : n;
    /* out_idx: the logits rows, then the embedding rows (FWD_WANT_EMBD);
     * slot[k]: where row k of that order goes among the wanted rows. */
    int32_t n_out = 0, n_tab = 0, n_lg = 0, n_want = 0;
    for (int32_t i = 0; i < n; i++)
        n_lg += b->want_logits && b->want_logits[i] && b->want_logits[i] != FWD_WANT_EMBD;
    int32_t *slot = c->out_slot, n_em = 0;
    for (int32_t i = 0; i < np; i++) {
        const bool real = i < n;
        h.token[i] = real ? b->token[i] : 0;
        h.pos[i] = real ? b->pos[i] : 0;
        h.seq[i] = real ? b->seq[i] : -1; /* padding: no KV store, zero attention */
        if (!real || !b->want_logits || !b->want_logits[i]) continue;
        const int32_t k = b->want_logits[i] == FWD_WANT_EMBD ? n_lg + n_em++ : n_out++;
        h.out_idx[k] = i;
        slot[k] = n_want++;
    }
    for (int32_t s = 0; s < b->n_seqs; s++) {
        h.table_off[s] = n_tab;
        h.table_len[s] = b->seqs[s].n_blocks;
        memcpy(h.tables + n_tab, b->seqs[s].block_table, (size_t)b->seqs[s].n_blocks * 4);
        n_tab += b->seqs[s].n_blocks;
    }
    const size_t meta_bytes = (size_t)(h.tables + n_tab - c->meta_host) * 4;
    CU(cudaMemcpyAsync(c->meta, c->meta_host, meta_bytes, cudaMemcpyHostToDevice, c->st));
    if (bucket) {
        if (cu_run_graph(c, bucket, err, errlen)) return -1;
    } else if (cu_layers(c, n, prefill, n_tiles, err, errlen)) {
        return -1;
    }
    struct cu_meta dm;
    cu_meta_at(c, c->meta, &dm);
    const size_t nv = (size_t)hp->n_vocab;
    for (int32_t r0 = 0; r0 < n_out; r0 += CUDA_LOGIT_CHUNK) {
        const int32_t nr = n_out - r0 < CUDA_LOGIT_CHUNK ? n_out - r0 : CUDA_LOGIT_CHUNK;
        CU(cu_gather_rows(c->x, dm.out_idx + r0, nr, hp->dim, c->rows, c->st));
        CU(cu_rmsnorm(c->rows, c->output_norm, c->rows, nr, hp->dim, hp->norm_eps, c->st));
        if (cu_mm(c, &c->output, c->rows, nr, c->logits, false, err, errlen)) return -1;
        if (hp->logit_softcap > 0)
            CU(cu_softcap(c->logits, (int64_t)nr * hp->n_vocab, hp->logit_softcap, c->st));
        const size_t bytes = (size_t)nr * nv * 4;
        CU(cudaMemcpyAsync(c->logits_host, c->logits, bytes, cudaMemcpyDeviceToHost, c->st));
        CU(cudaStreamSynchronize(c->st));
        for (int32_t k = 0; k < nr; k++)
            memcpy(logits + (size_t)slot[r0 + k] * nv, c->logits_host + (size_t)k * nv, nv * 4);
    }
    /* Embedding rows: the normed hidden state itself, dim floats at the
     * start of the row's slot (dim <= n_vocab: embd_rows). */
    for (int32_t r0 = 0; r0 < n_em; r0 += CUDA_LOGIT_CHUNK) {
        const int32_t nr = n_em - r0 < CUDA_LOGIT_CHUNK ? n_em - r0 : CUDA_LOGIT_CHUNK;
        const size_t d = (size_t)hp->dim;
        CU(cu_gather_rows(c->x, dm.out_idx + n_lg + r0, nr, hp->dim, c->rows, c->st));
        CU(cu_rmsnorm(c->rows, c->output_norm, c->rows, nr, hp->dim, hp->norm_eps, c->st));
        CU(cudaMemcpyAsync(c->logits_host, c->rows, (size_t)nr * d * 4, cudaMemcpyDeviceToHost,
                           c->st));
        CU(cudaStreamSynchronize(c->st));
        for (int32_t k = 0; k < nr; k++)
            memcpy(logits + (size_t)slot[n_lg + r0 + k] * nv, c->logits_host + (size_t)k * d,
                   d * 4);
    }
    CU(cudaStreamSynchronize(c->st));
    return 0;
fail:
    return -1;
}

static void cu_get_info(struct backend *be, struct backend_info *out)
{
    struct cuda_be *c = be->impl;
    struct nvml_health nh;
    size_t fr = 0, tot = 0;
    memset(out, 0, sizeof *out);
    out->name = "cuda";
    snprintf(out->device, sizeof out->device, "%s", c->dev_name);
    snprintf(out->runtime, sizeof out->runtime, "%s", c->runtime);
    out->weight_bytes = c->plan.weight_bytes;
    out->kv_bytes = c->plan.kv_bytes;
    out->workspace_bytes = c->plan.workspace_bytes + c->h16_bytes;
    out->f16_copy_bytes = c->h16_bytes;
    out->graph_nodes = c->graph_nodes;
    if (c->nvml && nvml_read(c->nvml, &nh)) {
        out->mem_total = nh.mem_total;
        out->mem_used = nh.mem_used;
        snprintf(out->note, sizeof out->note, "GPU %u%% busy, %u C", nh.util_pct, nh.temp_c);
    } else if (cudaSetDevice(c->dev) == cudaSuccess && cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
        out->mem_total = tot;
        out->mem_used = tot - fr;
    }
}

static void cu_close(struct backend *be)
{
    if (!be) return;
    struct cuda_be *c = be->impl;
    cudaSetDevice(c->dev);
    for (int i = 0; i < 8; i++)
        if (c->graphs[i]) cudaGraphExecDestroy(c->graphs[i]);
    if (c->blas) cublasDestroy(c->blas);
    if (c->st) cudaStreamDestroy(c->st);
    cudaFree(c->weights);
    cudaFree(c->h16);
    cudaFree(c->kv);
    cudaFree(c->ws);
    cudaFreeHost(c->meta_host);
    cudaFreeHost(c->logits_host);
    nvml_close(c->nvml);
    free(c->layers);
    free(c->out_slot);
    free(c->kvio_host);
    free(c);
}

/* f16 blocks between this pool's token rows ([slot][head][dim]) and the CPU
 * backend's planar blocks (attention.h: K [head][dim][slot], transposed for
 * its QK products; V [head][slot][dim]), one K or V run of a layer; the
 * quantized types keep token rows on both. */
static void cu_kv_planar(uint16_t *dst, const uint16_t *src, int32_t bt, int32_t nh, int32_t hd, bool is_k,
                         bool to_cpu)
{
    const size_t w = (size_t)nh * hd, rb = (size_t)hd * sizeof *dst;
    if (!is_k) { /* V: a head's row of hd values moves whole */
        for (int32_t t = 0; t < bt; t++)
            for (int32_t h = 0; h < nh; h++) {
                const size_t rows = ((size_t)t * nh + h) * hd, cpu = ((size_t)h * bt + t) * hd;
                if (to_cpu) memcpy(dst + cpu, src + rows, rb);
                else memcpy(dst + rows, src + cpu, rb);
            }
        return;
    }
    /* K: a bt x (nh * hd) transpose (value j of token t: t * w + j here, j * bt + t there) */
    for (size_t j = 0; j < w; j++)
        for (int32_t t = 0; t < bt; t++) {
            if (to_cpu) dst[j * bt + (size_t)t] = src[(size_t)t * w + j];
            else dst[(size_t)t * w + j] = src[j * bt + (size_t)t];
        }
}

/* One block of every layer's K and V, in the CPU backend's bytes (the disk
 * prompt cache's payload): 2 * n_layer runs of kv_block_tokens rows,
 * kv_layer_bytes apart on the device and back to back in buf, moved as one
 * strided copy on the stream (a save sees the last forward's stores, a
 * restore lands before the next forward); f16 is re-laid out on the host. */
static int cu_kv_block_io(struct backend *be, int32_t block, void *buf, bool write)
{
    struct cuda_be *c = be->impl;
    char err[256];
    const size_t errlen = sizeof err;
    if (!buf || block < 0 || block >= be->kv_n_blocks) return -1;
    const struct model_hparams *hp = &be->model->hp;
    const int32_t bt = be->kv_block_tokens;
    const size_t runs = 2u * (size_t)hp->n_layer;
    const size_t n = (size_t)(be->kv_bytes_per_token * (uint64_t)bt) / runs;
    const bool planar = c->plan.kv_type == KV_F16;
    uint8_t *dev = (uint8_t *)c->kv + (size_t)block * n, *host = buf;
    if (planar) {
        if (!c->kvio_host && !(c->kvio_host = malloc(runs * n))) return -1;
        host = c->kvio_host;
    }
    /* A pitch past the runtime's memPitch (2^31 - 1 bytes: a small model's
     * pool on a large GPU) is refused by the strided copy: a copy per run. */
    const bool strided = c->kv_layer_bytes <= INT32_MAX && !c->kvio_runs;
    CU(cudaSetDevice(c->dev));
    if (write) {
        for (size_t r = 0; planar && r < runs; r++)
            cu_kv_planar((uint16_t *)(host + r * n), (const uint16_t *)((const uint8_t *)buf + r * n), bt,
                         hp->n_head_kv, hp->head_dim, r % 2 == 0, false);
        if (strided)
            CU(cudaMemcpy2DAsync(dev, c->kv_layer_bytes, host, n, n, runs, cudaMemcpyHostToDevice, c->st));
        for (size_t r = 0; !strided && r < runs; r++)
            CU(cudaMemcpyAsync(dev + r * c->kv_layer_bytes, host + r * n, n, cudaMemcpyHostToDevice, c->st));
        CU(cudaStreamSynchronize(c->st));
    } else {
        if (strided)
            CU(cudaMemcpy2DAsync(host, n, dev, c->kv_layer_bytes, n, runs, cudaMemcpyDeviceToHost, c->st));
        for (size_t r = 0; !strided && r < runs; r++)
            CU(cudaMemcpyAsync(host + r * n, dev + r * c->kv_layer_bytes, n, cudaMemcpyDeviceToHost, c->st));
        CU(cudaStreamSynchronize(c->st));
        for (size_t r = 0; planar && r < runs; r++)
            cu_kv_planar((uint16_t *)((uint8_t *)buf + r * n), (const uint16_t *)(host + r * n), bt,
                         hp->n_head_kv, hp->head_dim, r % 2 == 0, true);
    }
    return 0;
fail:
    (void)err;
    return -1;
}

static const struct backend_ops cuda_ops = {
    .kv_block_io = cu_kv_block_io,
    .name = "cuda",
    .forward = cu_forward,
    .get_info = cu_get_info,
    .close = cu_close,
};

/* Finds the device; "no usable GPU" reasons come from here. */
static int cu_pick_device(int gpu, char *name, size_t namelen, char *err, size_t errlen)
{
    int count = 0;
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0)) {
        snprintf(err, errlen, "no CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
        return -1;
    }
    if (e == cudaErrorInsufficientDriver || e == cudaErrorStubLibrary) {
        snprintf(err, errlen, "CUDA driver not found or too old (cudaGetDeviceCount: %s)",
                 cudaGetErrorString(e));
        return -1;
    }
    if (e != cudaSuccess) {
        snprintf(err, errlen, "CUDA not usable (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
        return -1;
    }
    if (gpu < 0 || gpu >= count) {
        snprintf(err, errlen, "CUDA device %d not present (%d device%s)", gpu, count, count == 1 ? "" : "s");
        return -1;
    }
    CU(cudaGetDeviceProperties(&prop, gpu));
    CU(cudaSetDevice(gpu));
    snprintf(name, namelen, "%.80s (sm_%d%d, %.0f GiB)", prop.name, prop.major, prop.minor,
             prop.totalGlobalMem / CUDA_GIB);
    return 0;
fail:
    return -1;
}

static int cu_alloc_ws(struct cuda_be *c, char *err, size_t errlen)
{
    const struct cuda_ws *w = &c->wsz;
    CU(cudaMalloc(&c->ws, w->total));
    uint8_t *p = c->ws;
#define CU_SLICE(field, type) (c->field = (type)p, p += w->field)
    CU_SLICE(x, float *);
    CU_SLICE(h, float *);
    CU_SLICE(o, float *);
    CU_SLICE(q, float *);
    CU_SLICE(att, float *);
    CU_SLICE(k, float *);
    CU_SLICE(v, float *);
    CU_SLICE(g, float *);
    CU_SLICE(u, float *);
    c->attn_ws = (float *)p, p += w->attn;
    CU_SLICE(xh, void *);
    CU_SLICE(wtile, void *);
    c->rows = (float *)p, p += w->logit_rows;
    CU_SLICE(logits, float *);
    c->meta = (int32_t *)p, p += w->meta;
    c->blas_ws = p, p += w->cublas;
    c->xq = p, p += w->xq;
    c->freq_global = (float *)p, p += al256((uint64_t)c->be.model->hp.head_dim * 2);
    c->freq_local = (float *)p;
#undef CU_SLICE
    CU(cudaMallocHost((void **)&c->meta_host, w->meta));
    CU(cudaMallocHost((void **)&c->logits_host, w->logits));
    return 0;
fail:
    return -1;
}

/* Inverse frequencies for global and sliding-window layers (gemma3 bases differ). */
static int cu_rope_tables(struct cuda_be *c, char *err, size_t errlen)
{
    const struct model *m = c->be.model;
    const struct model_hparams *hp = &m->hp;
    const int32_t n_rot = hp->n_rot > 0 ? hp->n_rot : hp->head_dim;
    float f[128], fac[128];
    const float *factors = NULL;
    if (m->rope_freqs.data && m->rope_freqs.type == QT_F32 && m->rope_freqs.cols * m->rope_freqs.rows >= n_rot / 2) {
        memcpy(fac, m->rope_freqs.data, (size_t)n_rot / 2 * 4);
        factors = fac;
    }
    cuda_rope_freqs(n_rot, hp->rope_base, factors, f);
    CU(cudaMemcpy(c->freq_global, f, (size_t)n_rot / 2 * 4, cudaMemcpyHostToDevice));
    cuda_rope_freqs(n_rot, hp->rope_base_local > 0 ? hp->rope_base_local : hp->rope_base, NULL, f);
    CU(cudaMemcpy(c->freq_local, f, (size_t)n_rot / 2 * 4, cudaMemcpyHostToDevice));
    return 0;
fail:
    return -1;
}

struct backend *CUDA_RT_OPEN(const struct model *m, const struct backend_config *cfg,
                              char *err, size_t errlen)
{
    struct cuda_be *c = calloc(1, sizeof *c);
    size_t fr = 0, tot = 0;
    char pci[32];
    if (!c) {
        snprintf(err, errlen, "out of host memory");
        return NULL;
    }
    c->dev = cfg->gpu;
    c->be.ops = &cuda_ops;
    c->be.model = m;
    c->be.impl = c;
    if (cu_pick_device(cfg->gpu, c->dev_name, sizeof c->dev_name, err, errlen)) goto fail_free;
    {   /* the versions a baseline record names (app/bench_env.c): 13000 = 13.0 */
        int rt = 0, drv = 0;
        if (cudaRuntimeGetVersion(&rt) == cudaSuccess && cudaDriverGetVersion(&drv) == cudaSuccess)
            snprintf(c->runtime, sizeof c->runtime, "runtime %d.%d, driver %d.%d", rt / 1000,
                     rt % 1000 / 10, drv / 1000, drv % 1000 / 10);
    }
    CU(cudaMemGetInfo(&fr, &tot));
    char perr[512];
    if (cuda_plan_compute(m, cfg, fr, tot, &c->plan, perr, sizeof perr)) {
        snprintf(err, errlen, "%s: %s", c->dev_name, perr);
        goto fail;
    }
    c->layers = calloc((size_t)m->hp.n_layer, sizeof *c->layers);
    c->out_slot = malloc((size_t)c->plan.max_batch_tokens * sizeof *c->out_slot);
    if (!c->layers || !c->out_slot) {
        snprintf(err, errlen, "out of host memory");
        goto fail;
    }
    const char *mv = getenv("TERN_CUDA_MV_MAX"); /* crossover tuning for benchmarks */
    c->mv_max = mv ? atoi(mv) : CU_MV_MAX_N;
    if (c->mv_max < 0 || c->mv_max > CU_MV_MAX_N) c->mv_max = CU_MV_MAX_N;
    c->graphs_off = getenv("TERN_CUDA_NO_GRAPHS") != NULL;
    c->kvio_runs = getenv("TERN_CUDA_KVIO_RUNS") != NULL && strcmp(getenv("TERN_CUDA_KVIO_RUNS"), "0") != 0;
    /* int8 activations for Q4_0/Q4_1/Q8_0 (measured faster on the H200 at
     * every batch, docs/GPU.md); TERN_CUDA_MV_Q8=0 keeps the f32 matvec */
    const char *q8env = getenv("TERN_CUDA_MV_Q8");
    c->mv_q8 = q8env == NULL || strcmp(q8env, "0") != 0;
    cu_set_pdl(getenv("TERN_CUDA_NO_PDL") == NULL);
    const char *asp = getenv("TERN_CUDA_ATTN_SPLITS"); /* the trip's A/B at long contexts */
    c->attn_split_cap = asp ? atoi(asp) : CUDA_ATTN_SPLIT_CAP;
    if (c->attn_split_cap < 1 || c->attn_split_cap > 32) c->attn_split_cap = CUDA_ATTN_SPLIT_CAP;
    cu_set_attn_lanes(getenv("TERN_CUDA_ATTN_LANES") != NULL && strcmp(getenv("TERN_CUDA_ATTN_LANES"), "0") != 0);
    const char *mvp = getenv("TERN_CUDA_MV_PERSIST"); /* the trip's A/B of the q8 kernel's grid */
    cu_set_mv_persist(mvp != NULL && strcmp(mvp, "0") != 0);
    const char *mvpipe = getenv("TERN_CUDA_MV_PIPE"); /* the trip's A/B of the pipelined q8 matvec */
    cu_set_mv_pipe(mvpipe != NULL && strcmp(mvpipe, "0") != 0);
    struct cuda_plan *p = &c->plan;
    cuda_ws_size(&m->hp, p->max_batch_tokens, p->max_seqs, p->max_blocks_per_seq, &c->wsz);
    CU(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking));
    cudaError_t e = cudaMalloc(&c->weights, p->weight_bytes);
    if (e != cudaSuccess) goto oom;
    if ((e = cudaMalloc(&c->kv, p->kv_bytes)) != cudaSuccess) goto oom;
    c->kv_layer_bytes = p->kv_bytes / (2u * (uint64_t)m->hp.n_layer);
    if (cu_alloc_ws(c, err, errlen) || cu_rope_tables(c, err, errlen)) goto fail;
    /* the flash kernel's shared memory (98 KiB at head_dim 256) exceeds what
     * some GPUs allow (sm_75: 64 KiB): prefill then uses the decode kernel */
    c->flash_ok = cu_attn_prefill_init(m->hp.head_dim) == cudaSuccess;
    (void)cudaGetLastError();
    CUBLAS(cublasCreate(&c->blas));
    CUBLAS(cublasSetStream(c->blas, c->st));
    CUBLAS(cublasSetWorkspace(c->blas, c->blas_ws, c->wsz.cublas));
    CUBLAS(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    if (cu_upload(c, m, err, errlen)) goto fail;
    CU(cudaStreamSynchronize(c->st));
    if (cu_f16_cache(c, err, errlen)) goto fail;
    c->be.kv_block_tokens = p->kv_block_tokens;
    c->be.kv_n_blocks = p->kv_n_blocks;
    c->be.kv_bytes_per_token = p->kv_bytes_per_token;
    c->be.embd_rows = m->hp.dim <= m->hp.n_vocab; /* a hidden state fits a logits slot */
    if (cudaDeviceGetPCIBusId(pci, sizeof pci, c->dev) == cudaSuccess) c->nvml = nvml_open(pci);
    return &c->be;
oom: {
        char line[256];
        cuda_plan_format(&c->plan, line, sizeof line);
        snprintf(err, errlen, "%s: cudaMalloc: %s; plan: %s", c->dev_name, cudaGetErrorString(e), line);
    }
fail:
    cu_close(&c->be);
    return NULL;
fail_free:
    free(c);
    return NULL;
}

int CUDA_RT_PLAN(const struct model *m, const struct backend_config *cfg, char *out,
                 size_t outlen)
{
    char name[128], err[512];
    size_t fr = 0, tot = 0;
    struct cuda_plan p;
    const size_t errlen = sizeof err;
    if (cu_pick_device(cfg->gpu, name, sizeof name, err, sizeof err)) goto fail;
    CU(cudaMemGetInfo(&fr, &tot));
    if (cuda_plan_compute(m, cfg, fr, tot, &p, err, sizeof err)) goto fail;
    char line[384];
    cuda_plan_format(&p, line, sizeof line);
    snprintf(out, outlen, "%s: %s", name, line);
    return 0;
fail:
    snprintf(out, outlen, "no usable GPU: %s", err);
    return -1;
}

#endif /* TERN_HAVE_CUDA || TERN_CUDA_EMU */
