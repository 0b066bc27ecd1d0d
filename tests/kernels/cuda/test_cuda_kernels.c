/* test_cuda_kernels: every CUDA kernel against the CPU reference on random
 * data of several shapes and types (needs a GPU; run by tests/e2e/gpu/trip.sh,
 * also under compute-sanitizer). References: the GGUF reference dequantizer
 * (kernels/quant.c) with double-precision dots, the CPU ops (RMSNorm, RoPE,
 * SwiGLU/GEGLU) and the CPU paged attention (kernels/cpu/attention.c).
 * Tolerances, per check, are relative to the size of the terms summed:
 *   dequant f32: 1e-6, dequant f16: 1e-3 (f16 rounding), matvec: 2e-5 of sum |w x|,
 *   fused GLU matvec: 1e-3 relative (3e-3 GEGLU: f16 table),
 *   norms/activations: 1e-5 (GELU 2e-3: f16 table), RoPE: 1e-4, KV store: 2e-3 (f16),
 *   q8_0/q4_0 KV store: V byte-exact, K within one quantization step (RoPE's last bits),
 *   attention: 2e-3 absolute (values in [-1, 1], f16 KV both sides; q8_0/q4_0: the
 *   same blocks both sides, 2e-3 x the largest stored |V|: q4_0's rotated rows). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "backend_cuda.h"
#include "cpu/attention.h"
#include "cpu/ops.h"
#include "cpu/threadpool.h"
#include "cuda_ops.h"
#include "quant.h"
#include "synthetic.h"
#include "tap.h"

#define CK(call)                                                                               \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            tap_ok(0, "%s: %s (line %d)", #call, cudaGetErrorString(e_), __LINE__);            \
            exit(tap_done() | 1);                                                              \
        }                                                                                      \
    } while (0)

static uint64_t rng = 0x1234567;
/* Under the CPU emulation of tests/kernels/cuda/emu the shapes are smaller (each
 * CUDA thread is a fiber there); the checks are the same. */
static bool emu;
static float frand(void) /* uniform [-1, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static void *dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    CK(cudaMalloc(&d, bytes ? bytes : 1));
    if (bytes) CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

static void host_copy(void *h, const void *d, size_t bytes)
{
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

static float *frand_vec(size_t n, float scale)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = scale * frand();
    return v;
}

/* A generated weight matrix on the host (GGUF bytes) and on the device in the
 * layout the kernels use, uploaded the way the backend does. */
struct wmat {
    struct cu_tensor t;
    uint8_t *host;
    size_t bytes;
    void *dev;
};

static void wmat_make(struct wmat *w, uint32_t type, int64_t rows, int64_t cols, uint32_t tid)
{
    const uint32_t bb = synth_block_bytes(type);
    w->bytes = (size_t)rows * qtype_row_bytes(type, (uint64_t)cols);
    w->host = malloc(w->bytes);
    for (size_t b = 0; b < w->bytes / bb; b++) synth_gen_block(5, tid, b, type, false, w->host + b * bb);
    CK(cudaMalloc(&w->dev, w->bytes));
    memset(&w->t, 0, sizeof w->t);
    w->t.q = w->dev;
    w->t.type = type;
    w->t.layout = cu_layout_for(type);
    w->t.rows = rows;
    w->t.cols = cols;
    w->t.row_bytes = qtype_row_bytes(type, (uint64_t)cols);
    if (w->t.layout == CU_LAYOUT_SPLIT)
        w->t.s = (uint8_t *)w->dev + (size_t)rows * (size_t)(cols / 32) * (type == QT_Q8_0 ? 32 : 16);
    /* generate on the device too: the bytes must equal the host generator's */
    void *stage = NULL;
    CK(cudaMalloc(&stage, w->bytes));
    CK(cu_synth_gen(stage, 5, tid, type, false, 0, w->bytes / bb, 0));
    uint8_t *back = malloc(w->bytes);
    host_copy(back, stage, w->bytes);
    if (memcmp(back, w->host, w->bytes) != 0)
        ok(0, "%s %lldx%lld: device generator differs from host", qtype_name(type), (long long)rows,
           (long long)cols);
    free(back);
    CK(cu_repack(&w->t, stage, 0, rows, 0));
    CK(cudaDeviceSynchronize());
    CK(cudaFree(stage));
}

static void wmat_free(struct wmat *w)
{
    free(w->host);
    cudaFree(w->dev);
}

static const uint32_t all_types[] = { QT_F32,  QT_F16,  QT_BF16, QT_Q4_0, QT_Q4_1,   QT_Q5_0,  QT_Q5_1, QT_Q8_0,
                                      QT_Q4_K, QT_Q5_K, QT_Q6_K, QT_Q2_K, QT_Q3_K, QT_IQ4_NL, QT_IQ4_XS };

static void test_dequant_matvec(void)
{
    const int64_t shapes[][2] = { { 1, 256 }, { 7, 512 }, { 67, 1024 }, { 300, 2304 },
                                  /* n x 12800 activations overflow the matvec's shared copy at n = 8 */
                                  { 24, 12800 } };
    const int ns[] = { 1, 2, 3, 5, 8 };
    for (size_t ti = 0; ti < sizeof all_types / sizeof all_types[0]; ti++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            if (emu && si == 3) continue; /* 300 x 2304: too slow as fibers */
            const uint32_t type = all_types[ti];
            const int64_t rows = shapes[si][0], cols = shapes[si][1];
            struct wmat w;
            wmat_make(&w, type, rows, cols, (uint32_t)(100 + si));
            float *ref = malloc((size_t)rows * cols * sizeof *ref);
            for (int64_t r = 0; r < rows; r++)
                dequant_row(type, w.host + r * w.t.row_bytes, ref + r * cols, cols);
            /* dequantization, f32 and f16 */
            float *d32 = NULL; /* also holds the 3 embedding rows */
            CK(cudaMalloc((void **)&d32, (size_t)(rows > 3 ? rows : 3) * cols * 4));
            CK(cu_dequant_f32(&w.t, 0, rows, d32, 0));
            float *g = malloc((size_t)rows * cols * 4);
            host_copy(g, d32, (size_t)rows * cols * 4);
            double worst = 0, wmax = 1e-30;
            for (int64_t i = 0; i < rows * cols; i++) {
                worst = fmax(worst, fabs(g[i] - ref[i]));
                wmax = fmax(wmax, fabs(ref[i]));
            }
            ok(worst <= 1e-6 * wmax, "dequant f32 %s %lldx%lld: max err %.3g (max |w| %.3g)",
               qtype_name(type), (long long)rows, (long long)cols, worst, wmax);
            uint16_t *h16 = malloc((size_t)rows * cols * 2);
            CK(cu_dequant_f16(&w.t, 0, rows, d32, 0)); /* f16 fits in the f32 buffer */
            host_copy(h16, d32, (size_t)rows * cols * 2);
            worst = 0;
            for (int64_t i = 0; i < rows * cols; i++)
                worst = fmax(worst, fabs(fp16_to_f32(h16[i]) - ref[i]) - 1e-3 * fabs(ref[i]));
            ok(worst <= 1e-7, "dequant f16 %s %lldx%lld: within f16 rounding", qtype_name(type),
               (long long)rows, (long long)cols);
            free(h16);
            /* matvec at several batch sizes */
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni += emu ? 2 : 1) {
                const int n = ns[ni];
                float *x = frand_vec((size_t)n * cols, 1.0f);
                float *dx = dev_copy(x, (size_t)n * cols * 4), *dy = NULL;
                CK(cudaMalloc((void **)&dy, (size_t)n * rows * 4));
                CK(cu_matvec(&w.t, dx, n, dy, 0));
                float *y = malloc((size_t)n * rows * 4);
                host_copy(y, dy, (size_t)n * rows * 4);
                double bad = 0;
                for (int t = 0; t < n; t++)
                    for (int64_t r = 0; r < rows; r++) {
                        double s = 0, mag = 0;
                        for (int64_t c = 0; c < cols; c++) {
                            s += (double)ref[r * cols + c] * x[t * cols + c];
                            mag += fabs((double)ref[r * cols + c] * x[t * cols + c]);
                        }
                        bad = fmax(bad, fabs(y[t * rows + r] - s) / (2e-5 * mag + 1e-30));
                    }
                ok(bad <= 1.0, "matvec %s %lldx%lld n=%d: error %.2f of tolerance", qtype_name(type),
                   (long long)rows, (long long)cols, n, bad);
                free(x);
                free(y);
                cudaFree(dx);
                cudaFree(dy);
            }
            /* embedding lookup of rows 0, last, and a padding token */
            int32_t ids[3] = { 0, (int32_t)rows - 1, -1 };
            int32_t *did = dev_copy(ids, sizeof ids);
            CK(cu_embed(&w.t, did, 3, 2.0f, d32, 0));
            float *e = malloc(3 * cols * 4);
            host_copy(e, d32, 3 * cols * 4);
            worst = 0;
            for (int64_t c = 0; c < cols; c++) {
                worst = fmax(worst, fabs(e[c] - 2.0f * ref[c]));
                worst = fmax(worst, fabs(e[cols + c] - 2.0f * ref[(rows - 1) * cols + c]));
                worst = fmax(worst, fabs(e[2 * cols + c]));
            }
            ok(worst <= 2e-6 * wmax, "embed %s %lldx%lld (scaled, padding row zero)", qtype_name(type),
               (long long)rows, (long long)cols);
            free(e);
            cudaFree(did);
            free(g);
            free(ref);
            cudaFree(d32);
            wmat_free(&w);
        }
    }
}

/* reference y[t][r] = x[t] . w[r] in double */
static void ref_mv(const struct wmat *w, const float *x, int n, double *y, double *mag)
{
    const int64_t rows = w->t.rows, cols = w->t.cols;
    float *row = malloc((size_t)cols * sizeof *row);
    for (int64_t r = 0; r < rows; r++) {
        dequant_row(w->t.type, w->host + r * w->t.row_bytes, row, cols);
        for (int t = 0; t < n; t++) {
            double s = 0, m = 0;
            for (int64_t c = 0; c < cols; c++) {
                s += (double)row[c] * x[t * cols + c];
                m += fabs((double)row[c] * x[t * cols + c]);
            }
            y[t * rows + r] = s;
            mag[t * rows + r] = m;
        }
    }
    free(row);
}

/* q, k, v in one launch (last with odd rows), and gate/up with the GLU fused. */
static void test_fused_matvec(void)
{
    const uint32_t types[] = { QT_F16, QT_Q4_0, QT_Q5_0, QT_Q8_0, QT_Q4_K, QT_Q6_K, QT_Q2_K, QT_IQ4_XS };
    const int64_t cols = 512, rows3[3] = { 64, 16, 13 };
    float *table = malloc(65536 * sizeof *table);
    ops_gelu_table_init(table);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (int n = 1; n <= 8; n += 3) {
            struct wmat w[3];
            float *x = frand_vec((size_t)n * cols, 1.0f), *dx = dev_copy(x, (size_t)n * cols * 4);
            const struct cu_tensor *wp[3];
            float *dy[3];
            for (int i = 0; i < 3; i++) {
                wmat_make(&w[i], types[ti], rows3[i], cols, (uint32_t)(300 + i));
                wp[i] = &w[i].t;
                CK(cudaMalloc((void **)&dy[i], (size_t)n * rows3[i] * 4));
            }
            CK(cu_matvec_multi(wp, dy, 3, dx, n, 0));
            double bad = 0;
            for (int i = 0; i < 3; i++) {
                double *ry = malloc((size_t)n * rows3[i] * sizeof *ry), *rm = malloc((size_t)n * rows3[i] * sizeof *rm);
                float *gy = malloc((size_t)n * rows3[i] * 4);
                ref_mv(&w[i], x, n, ry, rm);
                host_copy(gy, dy[i], (size_t)n * rows3[i] * 4);
                for (int64_t j = 0; j < n * rows3[i]; j++) bad = fmax(bad, fabs(gy[j] - ry[j]) / (2e-5 * rm[j] + 1e-30));
                free(ry);
                free(rm);
                free(gy);
            }
            ok(bad <= 1.0, "matvec q/k/v in one launch %s n=%d: error %.2f of tolerance", qtype_name(types[ti]), n, bad);
            /* gate = w[0] rows 0..15 (as a 16-row view), up = w[1] */
            struct cu_tensor gate = w[0].t;
            gate.rows = 16;
            for (int gelu = 0; gelu < 2; gelu++) {
                CK(cu_matvec_glu(&gate, &w[1].t, dx, n, gelu, dy[0], 0)); /* 16 rows: dy[0] holds 64 */
                float *gy = malloc((size_t)n * 16 * 4), *rg = malloc((size_t)n * 16 * 4), *ru = malloc((size_t)n * 16 * 4);
                double *y0 = malloc((size_t)n * 64 * sizeof *y0), *m0 = malloc((size_t)n * 64 * sizeof *m0);
                double *y1 = malloc((size_t)n * 16 * sizeof *y1), *m1 = malloc((size_t)n * 16 * sizeof *m1);
                ref_mv(&w[0], x, n, y0, m0);
                ref_mv(&w[1], x, n, y1, m1);
                for (int t = 0; t < n; t++)
                    for (int r = 0; r < 16; r++) {
                        rg[t * 16 + r] = (float)y0[t * 64 + r];
                        ru[t * 16 + r] = (float)y1[t * 16 + r];
                    }
                if (gelu) ops_geglu(rg, ru, (int64_t)n * 16, table);
                else ops_swiglu(rg, ru, (int64_t)n * 16);
                host_copy(gy, dy[0], (size_t)n * 16 * 4);
                double e = 0;
                for (int j = 0; j < n * 16; j++) e = fmax(e, fabs(gy[j] - rg[j]) / (fabs(rg[j]) + 1e-3));
                ok(e <= (gelu ? 3e-3 : 1e-3), "matvec gate+up %s fused %s n=%d: rel err %.2g",
                   gelu ? "GEGLU" : "SwiGLU", qtype_name(types[ti]), n, e);
                free(gy);
                free(rg);
                free(ru);
                free(y0);
                free(m0);
                free(y1);
                free(m1);
            }
            for (int i = 0; i < 3; i++) {
                wmat_free(&w[i]);
                cudaFree(dy[i]);
            }
            free(x);
            cudaFree(dx);
        }
    }
    free(table);
}

/* A kernel that writes its output also as int8 blocks (xq) must give exactly
 * what cu_quant_q8 makes of its f32 output: the q8 matvec after it cannot
 * tell which kernel quantized. */
static void check_q8_fused(const float *dout, int32_t n, int64_t cols, const void *xq, const char *what)
{
    const size_t bytes = cu_q8_bytes(n, cols), nb = (size_t)n * (size_t)(cols / 32);
    const size_t ds_off = (nb * 32 + 255) & ~(size_t)255;
    void *ref = NULL;
    CK(cudaMalloc(&ref, bytes));
    CK(cu_quant_q8(dout, n, cols, ref, 0));
    uint8_t *a = malloc(bytes), *b = malloc(bytes);
    host_copy(a, xq, bytes);
    host_copy(b, ref, bytes);
    ok(memcmp(a, b, nb * 32) == 0 && memcmp(a + ds_off, b + ds_off, nb * 8) == 0,
       "%s: its int8 blocks are cu_quant_q8's of its output, bit for bit", what);
    free(a);
    free(b);
    cudaFree(ref);
}

static void test_norm_act(void)
{
    const int n = 5, dim = 576;
    float *x = frand_vec((size_t)n * dim, 3.0f), *d = frand_vec((size_t)n * dim, 1.0f);
    float *w = frand_vec(dim, 1.0f);
    float *dx = dev_copy(x, (size_t)n * dim * 4), *dd = dev_copy(d, (size_t)n * dim * 4);
    float *dw = dev_copy(w, dim * 4), *dout = NULL;
    CK(cudaMalloc((void **)&dout, (size_t)n * dim * 4));
    CK(cu_add_rmsnorm(dx, dd, dw, dout, n, dim, 1e-5f, 0));
    float *gx = malloc((size_t)n * dim * 4), *go = malloc((size_t)n * dim * 4), *ref = malloc(dim * 4);
    host_copy(gx, dx, (size_t)n * dim * 4);
    host_copy(go, dout, (size_t)n * dim * 4);
    double ex = 0, eo = 0;
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < dim; i++) ex = fmax(ex, fabs(gx[t * dim + i] - (x[t * dim + i] + d[t * dim + i])));
        ops_rmsnorm(ref, gx + t * dim, w, dim, 1e-5f);
        for (int i = 0; i < dim; i++) eo = fmax(eo, fabs(go[t * dim + i] - ref[i]) / (fabs(ref[i]) + 1e-3));
    }
    ok(ex <= 1e-6, "add_rmsnorm: residual x += d (err %.2g)", ex);
    ok(eo <= 1e-5, "add_rmsnorm: norm matches ops_rmsnorm (rel err %.2g)", eo);
    CK(cu_rmsnorm(dout, dw, dout, n, dim, 1e-5f, 0)); /* in place */
    host_copy(gx, dout, (size_t)n * dim * 4);
    eo = 0;
    for (int t = 0; t < n; t++) {
        ops_rmsnorm(ref, go + t * dim, w, dim, 1e-5f);
        for (int i = 0; i < dim; i++) eo = fmax(eo, fabs(gx[t * dim + i] - ref[i]) / (fabs(ref[i]) + 1e-3));
    }
    ok(eo <= 1e-5, "rmsnorm in place (rel err %.2g)", eo);
    /* the residual add and norm also writing int8 blocks (decode's q8 matvecs) */
    {
        void *xq = NULL;
        float *d2 = dev_copy(d, (size_t)n * dim * 4);
        CK(cudaMalloc(&xq, cu_q8_bytes(n, dim)));
        CK(cu_add_rmsnorm_q8(dx, d2, dw, dout, xq, n, dim, 1e-5f, 0));
        check_q8_fused(dout, n, dim, xq, "add_rmsnorm_q8");
        ok(cu_add_rmsnorm_q8(dx, d2, dw, dout, xq, n, dim - 1, 1e-5f, 0) == cudaErrorInvalidValue,
           "add_rmsnorm_q8: a width that is not a multiple of 32 is refused");
        cudaFree(xq);
        cudaFree(d2);
    }

    /* SwiGLU and GEGLU */
    float *table = malloc(65536 * sizeof *table);
    ops_gelu_table_init(table);
    for (int gelu = 0; gelu < 2; gelu++) {
        float *u = frand_vec((size_t)n * dim, 2.0f);
        float *du = dev_copy(u, (size_t)n * dim * 4);
        CK(cudaMemcpy(dout, x, (size_t)n * dim * 4, cudaMemcpyHostToDevice));
        CK(cu_glu(dout, du, dout, n, dim, gelu, 0));
        host_copy(go, dout, (size_t)n * dim * 4);
        float *r = malloc((size_t)n * dim * 4);
        memcpy(r, x, (size_t)n * dim * 4);
        if (gelu) ops_geglu(r, u, (int64_t)n * dim, table);
        else ops_swiglu(r, u, (int64_t)n * dim);
        double e = 0;
        for (int i = 0; i < n * dim; i++) e = fmax(e, fabs(go[i] - r[i]) / (fabs(r[i]) + 1e-2));
        ok(e <= (gelu ? 2e-3 : 1e-5), "%s matches the CPU op (rel err %.2g)", gelu ? "GEGLU" : "SwiGLU", e);
        free(r);
        free(u);
        cudaFree(du);
    }
    free(table);
    free(x);
    free(d);
    free(w);
    free(gx);
    free(go);
    free(ref);
    cudaFree(dx);
    cudaFree(dd);
    cudaFree(dw);
    cudaFree(dout);
}

/* RoPE fused with the KV store, both styles, full and partial rotation. */
static void test_rope_store(void)
{
    const int n = 3, n_head = 4, n_kv = 2, hd = 64, bt = 16, n_blocks = 4;
    const int32_t pos[] = { 0, 17, 40 }, seq[] = { 0, 0, 0 }, table[] = { 2, 0, 3, 1 };
    const int32_t toff[] = { 0 }, tlen[] = { 4 };
    for (int style = 0; style < 4; style++) {
        const bool neox = style & 1;
        const int n_rot = style & 2 ? hd / 2 : hd;
        float *q = frand_vec((size_t)n * n_head * hd, 1.0f), *k = frand_vec((size_t)n * n_kv * hd, 1.0f);
        float *v = frand_vec((size_t)n * n_kv * hd, 1.0f);
        float inv[64];
        cuda_rope_freqs(n_rot, 10000.0f, NULL, inv);
        float *dq = dev_copy(q, (size_t)n * n_head * hd * 4), *dk = dev_copy(k, (size_t)n * n_kv * hd * 4);
        float *dv = dev_copy(v, (size_t)n * n_kv * hd * 4), *dinv = dev_copy(inv, sizeof inv);
        const size_t pool = (size_t)n_blocks * bt * n_kv * hd * 2;
        void *kc = NULL, *vc = NULL;
        CK(cudaMalloc(&kc, pool));
        CK(cudaMalloc(&vc, pool));
        struct cu_attn_batch b = { n, dev_copy(pos, sizeof pos), dev_copy(seq, sizeof seq),
                                   dev_copy(toff, sizeof toff), dev_copy(tlen, sizeof tlen),
                                   dev_copy(table, sizeof table) };
        struct cu_attn_shape sh = { n_head, n_kv, hd, n_rot, bt, 0, 1.0f, CU_KV_F16 };
        CK(cu_rope_store(dq, dk, dv, &b, &sh, dinv, 1.0f, neox, kc, vc, 0));
        float *gq = malloc((size_t)n * n_head * hd * 4);
        uint16_t *gk = malloc(pool), *gv = malloc(pool);
        host_copy(gq, dq, (size_t)n * n_head * hd * 4);
        host_copy(gk, kc, pool);
        host_copy(gv, vc, pool);
        double eq = 0, ek = 0, ev = 0;
        float cs[64];
        for (int t = 0; t < n; t++) {
            ops_rope_cache(cs, n_rot, pos[t], 10000.0f, 1.0f, NULL);
            ops_rope_apply(q + (size_t)t * n_head * hd, n_head, hd, n_rot, cs, neox);
            ops_rope_apply(k + (size_t)t * n_kv * hd, n_kv, hd, n_rot, cs, neox);
            for (int i = 0; i < n_head * hd; i++)
                eq = fmax(eq, fabs(gq[t * n_head * hd + i] - q[t * n_head * hd + i]));
            const size_t slot = ((size_t)table[pos[t] / bt] * bt + pos[t] % bt) * n_kv * hd;
            for (int i = 0; i < n_kv * hd; i++) {
                ek = fmax(ek, fabs(fp16_to_f32(gk[slot + i]) - k[t * n_kv * hd + i]));
                ev = fmax(ev, fabs(fp16_to_f32(gv[slot + i]) - v[t * n_kv * hd + i]));
            }
        }
        ok(eq <= 1e-4, "rope q %s n_rot %d vs ops_rope_apply (err %.2g)", neox ? "neox" : "normal", n_rot, eq);
        ok(ek <= 2e-3, "rope k stored in its slot as f16 (err %.2g)", ek);
        ok(ev <= 2e-3, "v stored in its slot as f16 (err %.2g)", ev);
        free(q);
        free(k);
        free(v);
        free(gq);
        free(gk);
        free(gv);
        cudaFree(dq);
        cudaFree(dk);
        cudaFree(dv);
        cudaFree(dinv);
        cudaFree(kc);
        cudaFree(vc);
        cudaFree((void *)b.pos);
        cudaFree((void *)b.seq);
        cudaFree((void *)b.table_off);
        cudaFree((void *)b.table_len);
        cudaFree((void *)b.tables);
    }
}

/* RoPE fused with the quantized KV store (q8_0, q4_0): the pools hold the
 * CPU backend's bytes. V (no RoPE on the way) must be byte for byte what the
 * CPU's attn_kv_store writes for the same rows, Hadamard rotation included;
 * K (rotated by RoPE first, whose sin/cos differ in the last bits) within
 * one quantization step of the CPU's value, and nearly all its bytes equal. */
static void test_rope_store_quant(void)
{
    const int n = 3, n_head = 4, n_kv = 2, bt = 16, n_blocks = 4;
    const int32_t pos[] = { 0, 17, 40 }, seq[] = { 0, 0, 0 }, table[] = { 2, 0, 3, 1 };
    const int32_t toff[] = { 0 }, tlen[] = { 4 };
    for (int kt = CU_KV_Q8_0; kt <= CU_KV_Q4_0; kt++)
        for (int hi = 0; hi < 3; hi++) {
            const int hd = 64 << hi, n_rot = hi == 1 ? hd / 2 : hd;
            const bool neox = hi == 2;
            const enum ops_kv_type ot = kt == CU_KV_Q8_0 ? OPS_KV_Q8_0 : OPS_KV_Q4_0;
            const char *tn = kt == CU_KV_Q8_0 ? "q8_0" : "q4_0";
            const size_t row = ops_kv_row_bytes(ot, (int64_t)n_kv * hd), pool = (size_t)n_blocks * bt * row;
            float *q = frand_vec((size_t)n * n_head * hd, 1.0f), *k = frand_vec((size_t)n * n_kv * hd, 1.0f);
            float *v = frand_vec((size_t)n * n_kv * hd, 1.0f);
            float inv[128];
            cuda_rope_freqs(n_rot, 10000.0f, NULL, inv);
            float *dq = dev_copy(q, (size_t)n * n_head * hd * 4), *dk = dev_copy(k, (size_t)n * n_kv * hd * 4);
            float *dv = dev_copy(v, (size_t)n * n_kv * hd * 4), *dinv = dev_copy(inv, sizeof inv);
            uint8_t *gk = calloc(1, pool), *gv = calloc(1, pool), *ck = calloc(1, pool), *cv = calloc(1, pool);
            void *kc = dev_copy(gk, pool), *vc = dev_copy(gv, pool);
            struct cu_attn_batch b = { n, dev_copy(pos, sizeof pos), dev_copy(seq, sizeof seq),
                                       dev_copy(toff, sizeof toff), dev_copy(tlen, sizeof tlen),
                                       dev_copy(table, sizeof table) };
            struct cu_attn_shape sh = { n_head, n_kv, hd, n_rot, bt, 0, 1.0f, kt };
            CK(cu_rope_store(dq, dk, dv, &b, &sh, dinv, 1.0f, neox, kc, vc, 0));
            float *gq = malloc((size_t)n * n_head * hd * 4);
            host_copy(gq, dq, (size_t)n * n_head * hd * 4);
            host_copy(gk, kc, pool);
            host_copy(gv, vc, pool);
            /* the CPU backend's store of the same rows (RoPE'd K) */
            struct attn_layer L = { ck, cv, ot, bt, row, 0, NULL, NULL, 0 };
            double eq = 0, ek = 0;
            float cs[256];
            for (int t = 0; t < n; t++) {
                ops_rope_cache(cs, n_rot, pos[t], 10000.0f, 1.0f, NULL);
                ops_rope_apply(q + (size_t)t * n_head * hd, n_head, hd, n_rot, cs, neox);
                ops_rope_apply(k + (size_t)t * n_kv * hd, n_kv, hd, n_rot, cs, neox);
                for (int i = 0; i < n_head * hd; i++)
                    eq = fmax(eq, fabs(gq[t * n_head * hd + i] - q[t * n_head * hd + i]));
                attn_kv_store(&L, n_kv, hd, table[pos[t] / bt], pos[t] % bt, k + (size_t)t * n_kv * hd,
                              v + (size_t)t * n_kv * hd);
            }
            /* K: element by element, against one step of the CPU's block */
            float *fg = malloc((size_t)n_kv * hd * 4), *fc = malloc((size_t)n_kv * hd * 4);
            size_t same = 0;
            for (int t = 0; t < n; t++) {
                const size_t at = ((size_t)table[pos[t] / bt] * bt + pos[t] % bt) * row;
                dequant_row(kt == CU_KV_Q8_0 ? QT_Q8_0 : QT_Q4_0, gk + at, fg, (int64_t)n_kv * hd);
                dequant_row(kt == CU_KV_Q8_0 ? QT_Q8_0 : QT_Q4_0, ck + at, fc, (int64_t)n_kv * hd);
                for (int i = 0; i < n_kv * hd; i++) {
                    const uint8_t *blk = ck + at + (size_t)(i / 32) * (kt == CU_KV_Q8_0 ? 34 : 18);
                    const double step = fabs(fp16_to_f32((uint16_t)(blk[0] | blk[1] << 8)));
                    ek = fmax(ek, fabs(fg[i] - fc[i]) / (step > 0 ? step : 1));
                }
                for (size_t i = 0; i < row; i++) same += gk[at + i] == ck[at + i];
            }
            ok(eq <= 1e-4, "%s store, hd %d: q rotated by RoPE alone (err %.2g)", tn, hd, eq);
            ok(ek <= 1.01 && same >= (size_t)(0.97 * n * row),
               "%s K rows, hd %d, n_rot %d%s: within %.2f quantization steps of the CPU's store, %zu/%zu bytes equal",
               tn, hd, n_rot, neox ? " neox" : "", ek, same, (size_t)n * row);
            ok(memcmp(gv, cv, pool) == 0, "%s V rows, hd %d: the CPU's attn_kv_store bytes exactly%s", tn, hd,
               kt == CU_KV_Q4_0 ? " (Hadamard rotation included)" : "");
            free(fg);
            free(fc);
            free(q);
            free(k);
            free(v);
            free(gq);
            free(gk);
            free(gv);
            free(ck);
            free(cv);
            cudaFree(dq);
            cudaFree(dk);
            cudaFree(dv);
            cudaFree(dinv);
            cudaFree(kc);
            cudaFree(vc);
            cudaFree((void *)b.pos);
            cudaFree((void *)b.seq);
            cudaFree((void *)b.table_off);
            cudaFree((void *)b.table_len);
            cudaFree((void *)b.tables);
        }
}

/* Paged attention, decode and prefill kernels, against the CPU attention,
 * the pool in f16, q8_0 and q4_0 (kt: enum cu_kv_type). The quantized pools
 * are the CPU backend's own bytes (the same layout), copied to the device. */
static void test_attention(struct threadpool *tp, int kt)
{
    const struct { int n_head, n_kv, hd, window; } cfgs[] = {
        { 9, 3, 64, 0 }, { 32, 8, 128, 0 }, { 4, 1, 256, 7 }, { 8, 8, 64, 20 },
    };
    const int bt = 16, n_blocks = 40;
    const int lens[] = { 1, emu ? 21 : 37, 150 }; /* 150: several 32-key chunks per warp */
    const enum ops_kv_type ot = kt == CU_KV_Q8_0 ? OPS_KV_Q8_0 : kt == CU_KV_Q4_0 ? OPS_KV_Q4_0 : OPS_KV_F16;
    const char *tn = kt == CU_KV_Q8_0 ? "q8_0 " : kt == CU_KV_Q4_0 ? "q4_0 " : "";
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        const int nh = cfgs[ci].n_head, nkv = cfgs[ci].n_kv, hd = cfgs[ci].hd;
        const size_t row = (size_t)nkv * hd, pool_el = (size_t)n_blocks * bt * row;
        const size_t crow = ops_kv_row_bytes(ot, (int64_t)row), cpool = (size_t)n_blocks * bt * crow;
        uint16_t *kp = malloc(pool_el * 2), *vp = malloc(pool_el * 2);
        for (size_t i = 0; i < pool_el; i++) {
            kp[i] = f32_to_fp16(frand());
            vp[i] = f32_to_fp16(frand());
        }
        void *dk = NULL, *dv = NULL;
        if (kt == CU_KV_F16) {
            dk = dev_copy(kp, pool_el * 2);
            dv = dev_copy(vp, pool_el * 2);
        }
        /* three sequences over a shuffled pool: 1 + 3 + 10 blocks */
        int32_t perm[40];
        for (int i = 0; i < n_blocks; i++) perm[i] = i;
        for (int i = n_blocks - 1; i > 0; i--) {
            int j = (int)((frand() + 1.0f) * 0.5f * (float)(i + 1)) % (i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        int32_t toff[3], tlen[3], off = 0;
        for (int s = 0; s < 3; s++) {
            toff[s] = off;
            tlen[s] = (lens[s] + bt - 1) / bt;
            off += tlen[s];
        }
        int32_t *dtab = dev_copy(perm, sizeof perm), *dtoff = dev_copy(toff, sizeof toff);
        int32_t *dtlen = dev_copy(tlen, sizeof tlen);
        /* The same K and V for the CPU attention, in its own block layout
         * (attn_kv_store); the CUDA pools keep token rows, as the CPU's
         * quantized pools do. */
        uint8_t *ckp = malloc(cpool), *cvp = malloc(cpool);
        struct attn_layer L = { ckp, cvp, ot, bt, crow, 0, NULL, NULL, 0 };
        float *krow = malloc(row * 4), *vrow = malloc(row * 4);
        for (int blk = 0; blk < n_blocks; blk++)
            for (int j = 0; j < bt; j++) {
                const size_t at = ((size_t)blk * bt + (size_t)j) * row;
                for (size_t i = 0; i < row; i++) {
                    krow[i] = fp16_to_f32(kp[at + i]);
                    vrow[i] = fp16_to_f32(vp[at + i]);
                }
                attn_kv_store(&L, nkv, hd, blk, j, krow, vrow);
            }
        free(krow);
        free(vrow);
        /* The limit scales with the V values the products sum (the CPU rounds
         * the probabilities to f16): at most 1 here, but q4_0's rotated rows
         * reach ~2.5 (the output is rotated back, the rounding errors with it). */
        double vmax = 1;
        if (kt != CU_KV_F16) {
            dk = dev_copy(ckp, cpool);
            dv = dev_copy(cvp, cpool);
            float *vr = malloc(row * 4);
            for (int r = 0; r < n_blocks * bt; r++) {
                dequant_row(kt == CU_KV_Q8_0 ? QT_Q8_0 : QT_Q4_0, cvp + (size_t)r * crow, vr, (int64_t)row);
                for (size_t i = 0; i < row; i++) vmax = fmax(vmax, fabs(vr[i]));
            }
            free(vr);
        }
        struct cu_attn_shape sh = { nh, nkv, hd, hd, bt, cfgs[ci].window, 1.0f, kt };
        CK(cu_attn_prefill_init(hd));
        for (int mode = 0; mode < 2; mode++) {
            /* mode 0: decode, the last position of each sequence;
             * mode 1: prefill, every position of sequences 1 and 2 */
            int32_t pos[200], seq[200], n = 0;
            for (int s = 0; s < 3; s++) {
                if (mode == 0) {
                    pos[n] = lens[s] - 1;
                    seq[n++] = s;
                } else if (s > 0) {
                    for (int p = 0; p < lens[s]; p++) {
                        pos[n] = p;
                        seq[n++] = s;
                    }
                }
            }
            float *q = frand_vec((size_t)n * nh * hd, 1.0f), *ref = malloc((size_t)n * nh * hd * 4);
            const int32_t *tabs[200];
            for (int i = 0; i < n; i++) tabs[i] = perm + toff[seq[i]];
            struct attn_batch ab = { .n_tokens = n, .n_head = nh, .n_head_kv = nkv, .head_dim = hd,
                                     .window = cfgs[ci].window, .q = q, .out = ref, .pos = pos,
                                     .table = tabs, .scale = 1.0f };
            struct attn_scratch scr = { 0 };
            if (attn_forward(tp, cpu_isa_best(), &L, &ab, &scr) != 0) tap_bail("attn_forward scratch");
            attn_scratch_free(&scr);
            float *dq = dev_copy(q, (size_t)n * nh * hd * 4), *dout = NULL;
            CK(cudaMalloc((void **)&dout, (size_t)n * nh * hd * 4));
            struct cu_attn_batch b = { n, dev_copy(pos, n * 4), dev_copy(seq, n * 4), dtoff, dtlen, dtab };
            float *out = malloc((size_t)n * nh * hd * 4);
            const int splits[] = { 1, 3, 16 };
            for (int si = 0; si < (mode == 0 ? 6 : 1); si++) {
                /* decode: splits 1, 3, 16 with a row per warp, then with a lane per key */
                cu_set_attn_lanes(si >= 3);
                if (mode == 0) {
                    float *ws = NULL;
                    CK(cudaMalloc((void **)&ws, cu_attn_decode_ws(n, nh, hd, splits[si % 3])));
                    /* with int8 blocks of the output too (the q8 wo matvec's input) */
                    void *xq = NULL;
                    CK(cudaMalloc(&xq, cu_q8_bytes(n, (int64_t)nh * hd)));
                    CK(cu_attn_decode_q8(dq, dk, dv, &b, &sh, splits[si % 3], ws, dout, xq, 0));
                    host_copy(out, dout, (size_t)n * nh * hd * 4);
                    if (si == 0 || si == 3) check_q8_fused(dout, n, (int64_t)nh * hd, xq, "attn_decode_q8");
                    cudaFree(xq);
                    cudaFree(ws);
                } else {
                    int32_t tiles[400];
                    struct fwd_batch fb = { n, pos, pos, seq, NULL, 3, NULL };
                    int32_t nt = cuda_batch_tiles(&fb, cu_attn_tile_tokens(nh, nkv), tiles);
                    int32_t *dt = dev_copy(tiles, (size_t)nt * 8);
                    CK(cu_attn_prefill(dq, dk, dv, &b, &sh, dt, nt, dout, 0));
                    host_copy(out, dout, (size_t)n * nh * hd * 4);
                    cudaFree(dt);
                }
                double e = 0;
                for (size_t i = 0; i < (size_t)n * nh * hd; i++) e = fmax(e, fabs(out[i] - ref[i]));
                ok(e <= 2e-3 * vmax, "attention %s%s heads %d/%d hd %d window %d%s%s: max err %.2g vs CPU (limit %.2g)",
                   tn, mode ? "prefill" : "decode", nh, nkv, hd, cfgs[ci].window,
                   mode ? "" : (splits[si % 3] == 1 ? ", 1 split" : splits[si % 3] == 3 ? ", 3 splits" : ", 16 splits"),
                   mode == 0 && si >= 3 ? ", a lane per key" : "", e, 2e-3 * vmax);
            }
            cu_set_attn_lanes(false);
            free(q);
            free(ref);
            free(out);
            cudaFree(dq);
            cudaFree(dout);
            cudaFree((void *)b.pos);
            cudaFree((void *)b.seq);
        }
        free(kp);
        free(ckp);
        free(cvp);
        free(vp);
        cudaFree(dk);
        cudaFree(dv);
        cudaFree(dtab);
        cudaFree(dtoff);
        cudaFree(dtlen);
    }
}

/* The q8 matvec on its persistent grid (cu_set_mv_persist: warps walk several
 * row pairs, prefetching the next) computes each pair as the one-pass grid
 * does: the same bits, plain, stacked and GLU, with more pairs than warps. */
static void test_matvec_q8_persist(void)
{
    const int64_t cols = emu ? 512 : 4096, rows = emu ? 300 : 40000;
    struct wmat w[2];
    wmat_make(&w[0], QT_Q4_0, rows, cols, 811);
    wmat_make(&w[1], QT_Q4_0, rows, cols, 812);
    for (int n = 1; n <= 3; n += 2) {
        float *x = frand_vec((size_t)n * cols, 1.0f), *dx = dev_copy(x, (size_t)n * cols * 4), *y[2];
        void *xq = NULL;
        CK(cudaMalloc(&xq, cu_q8_bytes(n, cols)));
        CK(cu_quant_q8(dx, n, cols, xq, 0));
        for (int i = 0; i < 2; i++) CK(cudaMalloc((void **)&y[i], (size_t)n * rows * 4));
        const struct cu_tensor *wt[2] = { &w[0].t, &w[1].t };
        float *a = malloc((size_t)n * rows * 4 * 2), *b = malloc((size_t)n * rows * 4 * 2);
        for (int glu = 0; glu < 2; glu++) {
            for (int pass = 0; pass < 2; pass++) {
                cu_set_mv_persist(pass == 1);
                CK(cu_matvec_q8(wt, y, 2, glu, xq, n, 0));
                float *dst = pass ? b : a;
                host_copy(dst, y[0], (size_t)n * rows * 4);
                if (!glu) host_copy(dst + (size_t)n * rows, y[1], (size_t)n * rows * 4);
            }
            cu_set_mv_persist(false);
            const size_t cnt = (size_t)n * rows * (glu ? 1 : 2);
            ok(memcmp(a, b, cnt * 4) == 0, "matvec q8 on the persistent grid, %s, n=%d: the same bits",
               glu ? "gate+up" : "2 matrices stacked", n);
        }
        free(a);
        free(b);
        for (int i = 0; i < 2; i++) cudaFree(y[i]);
        cudaFree(xq);
        cudaFree(dx);
        free(x);
    }
    wmat_free(&w[0]);
    wmat_free(&w[1]);
}

/* The pipelined q8 matvec (cu_set_mv_pipe) on shapes where a warp walks
 * several row pairs (more pairs than resident warps: 64 under the emulation's
 * 4 SMs) and a pair takes several rounds with a partial last one (69 units of
 * 32 in a row, rounds of 64): the same bits as the default kernel, for the
 * three split formats, plain (a lone last row), stacked and GLU, 1, 3 and 8
 * tokens. */
static void test_matvec_q8_pipe(void)
{
    const uint32_t types[] = { QT_Q4_0, QT_Q4_1, QT_Q8_0 };
    const int64_t cols = 69 * 32, rows[2] = { emu ? 150 : 40000, emu ? 151 : 40001 };
    const int ns[] = { 1, 3, 8 };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        struct wmat w[2];
        wmat_make(&w[0], types[ti], rows[0], cols, 821);
        wmat_make(&w[1], types[ti], rows[1], cols, 822);
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            const int n = ns[ni];
            float *x = frand_vec((size_t)n * cols, 1.0f), *dx = dev_copy(x, (size_t)n * cols * 4), *y[2];
            void *xq = NULL;
            CK(cudaMalloc(&xq, cu_q8_bytes(n, cols)));
            CK(cu_quant_q8(dx, n, cols, xq, 0));
            for (int i = 0; i < 2; i++) CK(cudaMalloc((void **)&y[i], (size_t)n * rows[i] * 4));
            struct cu_tensor up = w[1].t;
            up.rows = rows[0];
            const struct cu_tensor *wt[2] = { &w[0].t, &w[1].t }, *gu[2] = { &w[0].t, &up };
            const size_t cnt = (size_t)n * (rows[0] + rows[1]);
            float *a = malloc(cnt * 4), *b = malloc(cnt * 4), *nan = malloc(cnt * 4);
            memset(nan, 0xff, cnt * 4); /* a row the kernel leaves unwritten reads as NaN */
            for (int glu = 0; glu < 2; glu++) {
                for (int pass = 0; pass < 2; pass++) {
                    cu_set_mv_pipe(pass == 1);
                    for (int i = 0; i < 2; i++)
                        CK(cudaMemcpy(y[i], nan, (size_t)n * rows[i] * 4, cudaMemcpyHostToDevice));
                    CK(cu_matvec_q8(glu ? gu : wt, y, 2, glu, xq, n, 0));
                    float *dst = pass ? b : a;
                    host_copy(dst, y[0], (size_t)n * rows[0] * 4);
                    if (!glu) host_copy(dst + (size_t)n * rows[0], y[1], (size_t)n * rows[1] * 4);
                }
                cu_set_mv_pipe(false);
                ok(memcmp(a, b, (glu ? (size_t)n * rows[0] : cnt) * 4) == 0,
                   "matvec q8 pipelined %s, %s, n=%d: the same bits as the default kernel", qtype_name(types[ti]),
                   glu ? "gate+up" : "2 matrices stacked, a lone last row", n);
            }
            free(a);
            free(b);
            free(nan);
            for (int i = 0; i < 2; i++) cudaFree(y[i]);
            cudaFree(xq);
            cudaFree(dx);
            free(x);
        }
        wmat_free(&w[0]);
        wmat_free(&w[1]);
    }
}

/* The int8-activation matvec (the default decode path): cu_quant_q8 must give
 * the CPU's own quantization (d = max/127, nearest even) bit for bit, and the
 * products equal the exact integer sums scaled in f32 (plain, q/k/v stacked,
 * GLU; 1, 3 and 8 tokens; a row count that leaves one row of a pair alone),
 * for the split formats and the K-quants. */
static void test_matvec_q8(void)
{
    const uint32_t types[] = { QT_Q4_0, QT_Q4_1, QT_Q8_0, QT_Q4_K, QT_Q5_K, QT_Q6_K,
                               QT_Q2_K, QT_Q3_K, QT_IQ4_NL, QT_IQ4_XS };
    const int64_t cols = emu ? 512 : 4096, rows3[3] = { 64, 16, 13 };
    const int ns[] = { 1, 3, 8 };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        struct wmat w[3];
        double *ref[3];
        for (int i = 0; i < 3; i++) {
            wmat_make(&w[i], types[ti], rows3[i], cols, (uint32_t)(700 + i));
            float *row = malloc((size_t)cols * 4);
            ref[i] = malloc((size_t)rows3[i] * cols * sizeof *ref[i]);
            for (int64_t r = 0; r < rows3[i]; r++) {
                dequant_row(types[ti], w[i].host + r * w[i].t.row_bytes, row, cols);
                for (int64_t c = 0; c < cols; c++) ref[i][r * cols + c] = row[c];
            }
            free(row);
        }
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            const int n = ns[ni];
            float *x = frand_vec((size_t)n * cols, 1.0f);
            /* the host's quantization of x, as the kernel is asked to do it */
            int8_t *hq = malloc((size_t)n * cols);
            float *hd = malloc((size_t)n * cols / 32 * 4);
            for (int64_t b = 0; b < n * cols / 32; b++) {
                float amax = 0;
                for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
                const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
                for (int j = 0; j < 32; j++) hq[b * 32 + j] = (int8_t)lrintf(x[b * 32 + j] * id);
                hd[b] = d;
            }
            float *dx = dev_copy(x, (size_t)n * cols * 4);
            void *xq = NULL;
            CK(cudaMalloc(&xq, cu_q8_bytes(n, cols)));
            CK(cu_quant_q8(dx, n, cols, xq, 0));
            int8_t *gq = malloc((size_t)n * cols);
            host_copy(gq, xq, (size_t)n * cols);
            ok(memcmp(gq, hq, (size_t)n * cols) == 0, "quant q8 n=%d: int8 activations equal the CPU's", n);
            float *y[3];
            for (int i = 0; i < 3; i++) CK(cudaMalloc((void **)&y[i], (size_t)n * 64 * 4));
            const struct cu_tensor *wt[3] = { &w[0].t, &w[1].t, &w[2].t };
            /* the split formats twice: as they run by default, then pipelined (cu_set_mv_pipe) */
            const bool split = types[ti] == QT_Q4_0 || types[ti] == QT_Q4_1 || types[ti] == QT_Q8_0;
            for (int pipe = 0; pipe < (split ? 2 : 1); pipe++) {
                cu_set_mv_pipe(pipe == 1);
                const char *vn = pipe ? " pipelined" : "";
                /* reference: sum over blocks of the dequantized weights times d * q */
                double bad = 0;
                for (int count = 1; count <= 3; count += 2) {
                    CK(cu_matvec_q8(wt, y, count, 0, xq, n, 0));
                    for (int i = 0; i < count; i++) {
                        float *gy = malloc((size_t)n * rows3[i] * 4);
                        host_copy(gy, y[i], (size_t)n * rows3[i] * 4);
                        for (int t = 0; t < n; t++)
                            for (int64_t r = 0; r < rows3[i]; r++) {
                                double s = 0, mag = 0;
                                for (int64_t c = 0; c < cols; c++) {
                                    const double v = ref[i][r * cols + c] * hd[(t * cols + c) / 32] * hq[t * cols + c];
                                    s += v;
                                    mag += fabs(v);
                                }
                                bad = fmax(bad, fabs(gy[t * rows3[i] + r] - s) / (2e-6 * mag + 1e-30));
                            }
                        free(gy);
                    }
                }
                ok(bad <= 1.0, "matvec q8%s %s n=%d, 1 and 3 matrices: error %.2f of tolerance", vn,
                   qtype_name(types[ti]), n, bad);
                /* GLU: gate = the first 16 rows of w[0], up = w[1] */
                struct cu_tensor gate = w[0].t;
                gate.rows = 16;
                const struct cu_tensor *gu[2] = { &gate, &w[1].t };
                CK(cu_matvec_q8(gu, y, 2, 1, xq, n, 0));
                float *gy = malloc((size_t)n * 16 * 4);
                host_copy(gy, y[0], (size_t)n * 16 * 4);
                double e = 0;
                for (int t = 0; t < n; t++)
                    for (int r = 0; r < 16; r++) {
                        double g = 0, u = 0;
                        for (int64_t c = 0; c < cols; c++) {
                            const double xv = hd[(t * cols + c) / 32] * hq[t * cols + c];
                            g += ref[0][r * cols + c] * xv;
                            u += ref[1][r * cols + c] * xv;
                        }
                        const double want = g / (1.0 + exp(-g)) * u;
                        e = fmax(e, fabs(gy[t * 16 + r] - want) / (fabs(want) + 1e-3));
                    }
                ok(e <= 1e-4, "matvec q8%s %s gate+up SwiGLU n=%d: rel err %.2g", vn, qtype_name(types[ti]), n, e);
                free(gy);
            }
            cu_set_mv_pipe(false);
            for (int i = 0; i < 3; i++) cudaFree(y[i]);
            cudaFree(xq);
            cudaFree(dx);
            free(gq);
            free(hq);
            free(hd);
            free(x);
        }
        for (int i = 0; i < 3; i++) {
            wmat_free(&w[i]);
            free(ref[i]);
        }
    }
    ok(cu_matvec_q8_supported(QT_Q4_K) && cu_matvec_q8_supported(QT_Q6_K) && cu_matvec_q8_supported(QT_Q4_0) &&
       cu_matvec_q8_supported(QT_Q2_K) && cu_matvec_q8_supported(QT_Q3_K) && cu_matvec_q8_supported(QT_IQ4_NL) &&
       cu_matvec_q8_supported(QT_IQ4_XS) && !cu_matvec_q8_supported(QT_Q5_0) && !cu_matvec_q8_supported(QT_F16) &&
       !cu_matvec_q8_supported(QT_BF16),
       "q8 path: Q4_0, Q4_1, Q8_0, the K-quants and IQ4; Q5_0 and the float types keep the f32 matvec");
    ok(cu_type_supported(QT_Q2_K) && cu_type_supported(QT_Q3_K) && cu_type_supported(QT_IQ4_NL) &&
       cu_type_supported(QT_IQ4_XS) && !cu_type_supported(QT_Q8_1) &&
       cu_tensor_bytes(QT_IQ4_XS, 3, 512) == 3 * 2 * 136 && cu_tensor_bytes(QT_IQ4_NL, 3, 64) == 3 * 2 * 18,
       "the kernels read Q2_K, Q3_K, IQ4_NL and IQ4_XS at their GGUF sizes; Q8_1 refused");
}

int main(int argc, char **argv)
{
    int dev_count = 0;
    if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0)
        return tap_bail("no CUDA device: this program runs on a GPU machine (tests/e2e/gpu/trip.sh)");
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    tap_diag("device: %s (sm_%d%d)", prop.name, prop.major, prop.minor);
    emu = strncmp(prop.name, "CPU emulation", 13) == 0;
    struct threadpool *tp = tp_open(4);
    test_dequant_matvec();
    test_fused_matvec();
    test_matvec_q8();
    test_matvec_q8_persist();
    test_matvec_q8_pipe();
    test_norm_act();
    test_rope_store();
    test_rope_store_quant();
    test_attention(tp, CU_KV_F16);
    test_attention(tp, CU_KV_Q8_0);
    test_attention(tp, CU_KV_Q4_0);
    tp_close(tp);
    if (argc < 2 || strcmp(argv[1], "--no-bandwidth") != 0) {
        double gbps = 0;
        CK(cu_copy_bandwidth((size_t)1 << 30, 20, &gbps));
        ok(gbps > 100, "device copy bandwidth %.0f GB/s", gbps);
    }
    return tap_done();
}
