/* bench_cuda: decode and prefill throughput of the CUDA backend on a
 * synthetic model generated on the device, each against a roofline measured
 * in the same run: decode against the copy bandwidth (weights + KV bytes per
 * step), prefill against cuBLAS's f16 GEMM rate at the layer's own shapes;
 * then the kernels alone at the 8B shapes (matvec, dequant, decode attention
 * at 4k context) and the decode graph's node count. Run by tests/e2e/gpu/trip.sh.
 * usage: bench_cuda NAME TYPE [JSON_OUT]   e.g. bench_cuda llama3-8b q4_0 out.json
 * BENCH_BATCHES="1,8" limits the decode batches, BENCH_NO_PREFILL=1 skips
 * prefill, BENCH_NO_KERNELS=1 the kernel figures (the ablation runs),
 * BENCH_PROFILE_STEP=S brackets decode step S with cudaProfilerStart/Stop,
 * BENCH_CTX=N starts the decode steps at position N (long-context decode),
 * BENCH_KV=q8_0|q4_0 stores the KV cache quantized (default f16).
 * Decode: B sequences from position 0, steps 16..ST timed; bytes per step =
 * every weight matrix once (all but the embedding table) + the KV read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_profiler_api.h>

#include "backend.h"
#include "backend_cuda.h"
#include "cuda_ops.h"
#include "model.h"
#include "quant.h"
#include "synthetic.h"

#define BT 16
#define STEPS 112
#define WARM 16

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t tbytes(const struct wtensor *t)
{
    return (uint64_t)t->rows * qtype_row_bytes(t->type, (uint64_t)t->cols);
}

/* Weight bytes a decode step reads: every matrix once, one embedding row. */
static uint64_t step_weight_bytes(const struct model *m)
{
    uint64_t b = tbytes(&m->output);
    for (int l = 0; l < m->hp.n_layer; l++) {
        const struct layer_weights *L = &m->layers[l];
        b += tbytes(&L->wq) + tbytes(&L->wk) + tbytes(&L->wv) + tbytes(&L->wo) + tbytes(&L->w_gate) +
             tbytes(&L->w_up) + tbytes(&L->w_down);
    }
    return b;
}

/* Seconds per call of the cuBLAS f16 GEMM the prefill path runs
 * (y[n][rows] = x[n][cols] . W^T, f16 in, f32 out), best of a few. */
static double gemm_seconds(cublasHandle_t h, void *w, void *x, float *y, int rows, int n, int cols)
{
    const float alpha = 1.0f, beta = 0.0f;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    double best = 1e30;
    for (int r = 0; r < 4; r++) {
        float ms = 0;
        cudaEventRecord(e0, 0);
        for (int i = 0; i < 5; i++)
            if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, w, CUDA_R_16F, cols, x,
                             CUDA_R_16F, cols, &beta, y, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
                return -1;
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        if (r > 0 && ms / 5e3 < best) best = ms / 5e3; /* the first round warms up */
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return best;
}

/* cuBLAS's time for one layer's seven products at n tokens, and their FLOPs. */
static int layer_gemm(const struct model_hparams *hp, int n, double *sec, double *flops)
{
    const int d = hp->dim, qd = hp->n_head * hp->head_dim, kvd = hp->n_head_kv * hp->head_dim,
              ff = hp->n_ff;
    const int shapes[7][2] = { { qd, d }, { kvd, d }, { kvd, d }, { d, qd }, { ff, d }, { ff, d }, { d, ff } };
    const size_t wmax = (size_t)ff * d, xmax = (size_t)n * (ff > qd ? ff : qd), ymax = (size_t)n * (ff > d ? ff : d);
    void *w = NULL, *x = NULL;
    float *y = NULL;
    cublasHandle_t h = NULL;
    int rc = -1;
    *sec = *flops = 0;
    if (cudaMalloc(&w, wmax * 2) || cudaMalloc(&x, xmax * 2) || cudaMalloc((void **)&y, ymax * 4) ||
        cudaMemset(w, 0x3c, wmax * 2) || cudaMemset(x, 0x3c, xmax * 2) || cublasCreate(&h))
        goto done;
    for (int i = 0; i < 7; i++) {
        const double t = gemm_seconds(h, w, x, y, shapes[i][0], n, shapes[i][1]);
        if (t < 0) goto done;
        *sec += t;
        *flops += 2.0 * n * shapes[i][0] * shapes[i][1];
    }
    rc = 0;
done:
    if (h) cublasDestroy(h);
    cudaFree(w);
    cudaFree(x);
    cudaFree(y);
    return rc;
}

/* Milliseconds per launch of fn over reps launches (after one warm-up). */
#define TIME_MS(reps, out_ms, call)                                                         \
    do {                                                                                    \
        cudaEvent_t e0_, e1_;                                                               \
        float ms_ = 0;                                                                      \
        cudaEventCreate(&e0_);                                                              \
        cudaEventCreate(&e1_);                                                              \
        (void)(call);                                                                       \
        cudaEventRecord(e0_, 0);                                                            \
        for (int r_ = 0; r_ < (reps); r_++) (void)(call);                                   \
        cudaEventRecord(e1_, 0);                                                            \
        cudaEventSynchronize(e1_);                                                          \
        cudaEventElapsedTime(&ms_, e0_, e1_);                                               \
        cudaEventDestroy(e0_);                                                              \
        cudaEventDestroy(e1_);                                                              \
        (out_ms) = ms_ / (reps);                                                            \
    } while (0)

/* A rows x cols tensor of `type` with synthetic weights, in the backend's layout. */
static int make_tensor(uint32_t type, int64_t rows, int64_t cols, struct cu_tensor *t, void **mem)
{
    uint32_t block = 1, bb = 1;
    cuda_fmt(type, &block, &bb);
    const size_t row_bytes = (size_t)(cols / block) * bb, bytes = row_bytes * (size_t)rows;
    void *stage = NULL;
    *mem = NULL;
    memset(t, 0, sizeof *t);
    t->type = type;
    t->layout = cu_layout_for(type);
    t->rows = rows;
    t->cols = cols;
    t->row_bytes = row_bytes;
    if (cudaMalloc(mem, bytes)) return -1;
    t->q = *mem;
    const uint32_t gb = synth_block_bytes(type);
    if (t->layout == CU_LAYOUT_SPLIT) {
        const size_t qbytes = (size_t)rows * (size_t)(cols / 32) * (type == QT_Q8_0 ? 32 : 16);
        t->s = (uint8_t *)*mem + qbytes;
        if (cudaMalloc(&stage, bytes) || cu_synth_gen(stage, 7, 1, type, false, 0, bytes / gb, 0) ||
            cu_repack(t, stage, 0, rows, 0) || cudaDeviceSynchronize()) {
            cudaFree(stage);
            return -1;
        }
        cudaFree(stage);
        return 0;
    }
    if (cu_synth_gen(*mem, 7, 1, type, false, 0, bytes / gb, 0) || cudaDeviceSynchronize()) return -1;
    return 0;
}

/* The kernels alone at the 8B shapes: matvec (batch 1) and dequant of a
 * 14336 x 4096 matrix, decode attention of one token at 4k context. */
static void kernel_figures(uint32_t type, const struct model_hparams *hp, FILE *js)
{
    const int64_t rows = hp->n_ff, cols = hp->dim;
    struct cu_tensor t;
    void *mem = NULL, *deq = NULL;
    float *x = NULL, *y = NULL;
    double mv_ms = -1, dq_ms = -1, at_ms = -1, q8_ms = -1;
    const size_t wbytes = cu_tensor_bytes(type, rows, cols);
    if (make_tensor(type, rows, cols, &t, &mem) == 0 && !cudaMalloc((void **)&x, cols * 4 * 8) &&
        !cudaMalloc((void **)&y, rows * 4 * 8) && !cudaMalloc(&deq, (size_t)rows * cols * 2) &&
        !cudaMemset(x, 0, cols * 4 * 8)) {
        float ms;
        TIME_MS(50, ms, cu_matvec(&t, x, 1, y, 0));
        mv_ms = cudaGetLastError() == cudaSuccess ? ms : -1;
        TIME_MS(20, ms, cu_dequant_f16(&t, 0, rows, deq, 0));
        dq_ms = cudaGetLastError() == cudaSuccess ? ms : -1;
        if (cu_matvec_q8_supported(type)) { /* the int8-activation path, quantization included */
            const struct cu_tensor *tw[1] = { &t };
            float *ty[1] = { y };
            TIME_MS(50, ms, (cu_quant_q8(x, 1, cols, deq, 0), cu_matvec_q8(tw, ty, 1, 0, deq, 1, 0)));
            q8_ms = cudaGetLastError() == cudaSuccess ? ms : -1;
        }
    }
    cudaFree(mem);
    cudaFree(deq);
    cudaFree(x);
    cudaFree(y);
    /* attention: one token at position 4095 over a 4096-token sequence, the
     * KV pool in f16, then q8_0 and q4_0 (the same kernel on fewer bytes) */
    const int ctx = 4096, bt = 16, nb = ctx / bt, hd = hp->head_dim, nkv = hp->n_head_kv, nh = hp->n_head;
    const size_t kvb = (size_t)ctx * nkv * hd * 2;
    double atq_ms[3] = { 0, 0, 0 }; /* f16, q8_0, q4_0 */
    void *kc = NULL, *vc = NULL;
    float *q = NULL, *out = NULL, *ws = NULL;
    int32_t *meta = NULL;
    const int32_t splits = cuda_attn_splits(1, nkv, 0);
    int32_t hmeta[4 + 256];
    hmeta[0] = ctx - 1; /* pos */
    hmeta[1] = 0;       /* seq */
    hmeta[2] = 0;       /* table_off */
    hmeta[3] = nb;      /* table_len */
    for (int i = 0; i < nb; i++) hmeta[4 + i] = i;
    if (!cudaMalloc(&kc, kvb) && !cudaMalloc(&vc, kvb) && !cudaMalloc((void **)&q, (size_t)nh * hd * 4) &&
        !cudaMalloc((void **)&out, (size_t)nh * hd * 4) &&
        !cudaMalloc((void **)&ws, cu_attn_decode_ws(1, nh, hd, splits)) &&
        !cudaMalloc((void **)&meta, sizeof hmeta) && !cudaMemset(kc, 0, kvb) && !cudaMemset(vc, 0, kvb) &&
        !cudaMemset(q, 0, (size_t)nh * hd * 4) &&
        !cudaMemcpy(meta, hmeta, sizeof hmeta, cudaMemcpyHostToDevice)) {
        const struct cu_attn_batch ab = { 1, meta, meta + 1, meta + 2, meta + 3, meta + 4 };
        for (int kt = CU_KV_F16; kt <= CU_KV_Q4_0; kt++) { /* the f16 pool holds the others' bytes */
            const struct cu_attn_shape sh = { nh, nkv, hd, hd, bt, 0, 1.0f / 11.3f, kt };
            float ms;
            TIME_MS(50, ms, cu_attn_decode(q, kc, vc, &ab, &sh, splits, ws, out, 0));
            atq_ms[kt] = cudaGetLastError() == cudaSuccess ? ms : -1;
        }
        at_ms = atq_ms[CU_KV_F16];
    }
    cudaFree(kc);
    cudaFree(vc);
    cudaFree(q);
    cudaFree(out);
    cudaFree(ws);
    cudaFree(meta);
    const double mv_gbps = mv_ms > 0 ? wbytes / (mv_ms * 1e-3) / 1e9 : 0;
    const double dq_gbps = dq_ms > 0 ? (wbytes + (double)rows * cols * 2) / (dq_ms * 1e-3) / 1e9 : 0;
    const double at_gbps = at_ms > 0 ? 2.0 * kvb / (at_ms * 1e-3) / 1e9 : 0;
    const double q8_gbps = q8_ms > 0 ? wbytes / (q8_ms * 1e-3) / 1e9 : 0;
    if (q8_ms > 0) printf("  kernels: int8-activation matvec (the default; quantize included) batch 1 %.1f us = %.0f GB/s\n", q8_ms * 1e3, q8_gbps);
    printf("  kernels: matvec %lldx%lld batch 1 %.1f us = %.0f GB/s; dequant to f16 %.0f GB/s (read + write); "
           "decode attention at %d tokens (%d splits) %.1f us = %.0f GB/s of KV\n",
           (long long)rows, (long long)cols, mv_ms * 1e3, mv_gbps, dq_gbps, ctx, splits, at_ms * 1e3, at_gbps);
    /* KV bytes of the quantized pools: 34 and 18 per 32 values against 64 */
    const double q8_kvb = kvb * 34.0 / 64, q4_kvb = kvb * 18.0 / 64;
    printf("  kernels: decode attention at %d tokens, KV q8_0 %.1f us = %.0f GB/s, q4_0 %.1f us = %.0f GB/s of KV "
           "(f16 %.1f us)\n", ctx, atq_ms[1] * 1e3, atq_ms[1] > 0 ? 2 * q8_kvb / (atq_ms[1] * 1e-3) / 1e9 : 0,
           atq_ms[2] * 1e3, atq_ms[2] > 0 ? 2 * q4_kvb / (atq_ms[2] * 1e-3) / 1e9 : 0, at_ms * 1e3);
    if (js)
        fprintf(js, ", \"kernels\": {\"matvec_us\": %.2f, \"matvec_gbps\": %.1f, \"dequant_gbps\": %.1f, "
                "\"attn4k_us\": %.2f, \"attn4k_gbps\": %.1f, \"attn4k_q8_0_us\": %.2f, \"attn4k_q4_0_us\": %.2f, "
                "\"matvec_q8_us\": %.2f, \"matvec_q8_gbps\": %.1f}",
                mv_ms * 1e3, mv_gbps, dq_gbps, at_ms * 1e3, at_gbps, atq_ms[1] * 1e3, atq_ms[2] * 1e3, q8_ms * 1e3,
                q8_gbps);
}

int main(int argc, char **argv)
{
    char err[1024];
    if (argc < 3) {
        fprintf(stderr, "usage: bench_cuda NAME TYPE [JSON_OUT]\n");
        return 2;
    }
    uint32_t type = QT_COUNT;
    for (uint32_t t = 0; t < QT_COUNT; t++)
        if (qtype_get(t) && strcasecmp(qtype_name(t), argv[2]) == 0) type = t;
    if (type == QT_COUNT) {
        fprintf(stderr, "bench_cuda: unknown type %s\n", argv[2]);
        return 2;
    }
    double bw = 0, rbw = 0;
    cudaError_t ce = cu_copy_bandwidth((size_t)1 << 30, 20, &bw);
    if (ce == cudaSuccess) ce = cu_read_bandwidth((size_t)1 << 30, 20, &rbw);
    if (ce != cudaSuccess) {
        fprintf(stderr, "bench_cuda: bandwidth probe: %s\n", cudaGetErrorString(ce));
        return 1;
    }
    double t0 = now();
    struct model *m = model_open_synthetic_ex(argv[1], type, 1, SYNTH_NO_HOST_DATA, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_cuda: %s\n", err);
        return 1;
    }
    int batches[8] = { 1, 8, 32, 64 }, n_batches = 4;
    const char *bl = getenv("BENCH_BATCHES");
    if (bl) {
        n_batches = 0;
        for (const char *q = bl; *q && n_batches < 8;) {
            int v = atoi(q);
            if (v >= 1 && v <= 64) batches[n_batches++] = v;
            q = strchr(q, ',');
            if (!q) break;
            q++;
        }
    }
    /* BENCH_CTX=N: the decode steps start at position N (the attention reads
     * N + step keys; the KV below N is whatever the pool holds: timing only) */
    const int ctx = getenv("BENCH_CTX") ? atoi(getenv("BENCH_CTX")) : 0;
    if (ctx < 0 || ctx > 65536) {
        fprintf(stderr, "bench_cuda: BENCH_CTX must be 0..65536\n");
        return 2;
    }
    int max_b = 1;
    for (int i = 0; i < n_batches; i++) max_b = batches[i] > max_b ? batches[i] : max_b;
    const int per = (ctx + STEPS + BT) / BT; /* blocks per sequence */
    const int32_t n_blocks = max_b * per > 1024 ? max_b * per : 1024;
    const char *kvs = getenv("BENCH_KV") ? getenv("BENCH_KV") : "f16";
    const enum kv_type kvt = strcmp(kvs, "q8_0") == 0 ? KV_Q8_0 : strcmp(kvs, "q4_0") == 0 ? KV_Q4_0 : KV_F16;
    if (kvt == KV_F16 && strcmp(kvs, "f16") != 0) {
        fprintf(stderr, "bench_cuda: BENCH_KV must be f16, q8_0 or q4_0\n");
        return 2;
    }
    const uint64_t kv_tok = 2ull * m->hp.n_layer * m->hp.n_head_kv * cuda_kv_head_bytes(kvt, m->hp.head_dim);
    struct backend_config cfg = { .kind = BACKEND_CUDA, .kv_type = kvt, .kv_block_tokens = BT,
                                  .kv_bytes = kv_tok * BT * n_blocks, .max_batch_tokens = 4096,
                                  .max_seqs = 64 };
    struct backend *be = backend_cuda_open(m, &cfg, err, sizeof err);
    if (!be) {
        fprintf(stderr, "bench_cuda: %s\n", err);
        return 1;
    }
    const double t_load = now() - t0;
    struct backend_info info;
    be->ops->get_info(be, &info);
    const int32_t nv = m->hp.n_vocab;
    float *logits = malloc((size_t)64 * nv * sizeof *logits);
    int32_t *tables = malloc((size_t)n_blocks * sizeof *tables);
    for (int i = 0; i < n_blocks; i++) tables[i] = i;
    const uint64_t wstep = step_weight_bytes(m);
    FILE *js = argc > 3 ? fopen(argv[3], "w") : NULL;
    printf("bench %s %s (KV %s) on %s: load %.1f s (weights generated on the device), weights %.2f GiB, "
           "copy bandwidth %.0f GB/s, streaming read %.0f GB/s\n", argv[1], qtype_name(type), kvs, info.device, t_load,
           info.weight_bytes / 1073741824.0, bw, rbw);
    if (js)
        fprintf(js, "{\"model\": \"%s\", \"type\": \"%s\", \"kv_type\": \"%s\", \"device\": \"%s\", \"copy_gbps\": %.1f, "
                "\"read_gbps\": %.1f, \"load_s\": %.2f, \"weight_bytes\": %llu, \"step_weight_bytes\": %llu, "
                "\"decode\": [", argv[1], qtype_name(type), kvs, info.device, bw, rbw, t_load,
                (unsigned long long)info.weight_bytes, (unsigned long long)step_weight_bytes(m));

    double tps1 = 0;
    int rc = 0;
    const int prof_step = getenv("BENCH_PROFILE_STEP") ? atoi(getenv("BENCH_PROFILE_STEP")) : -1;
    for (int bi = 0; bi < n_batches && rc == 0; bi++) {
        const int B = batches[bi];
        struct fwd_seq seqs[64];
        int32_t tok[64], pos[64], seq[64];
        uint8_t want[64];
        for (int s = 0; s < B; s++) {
            seqs[s].block_table = tables + s * per;
            seqs[s].n_blocks = per;
            seq[s] = s;
            want[s] = 1;
        }
        double ts = 0;
        uint64_t kv_read = 0;
        for (int step = 0; step < STEPS && rc == 0; step++) {
            for (int s = 0; s < B; s++) {
                tok[s] = (step * 7919 + s * 104729) % nv;
                pos[s] = ctx + step;
            }
            struct fwd_batch b = { B, tok, pos, seq, want, B, seqs };
            /* BENCH_PROFILE_STEP=S: only step S of the first batch inside the
             * profiler's range (ncu --profile-from-start off: one step's kernels) */
            const bool prof = bi == 0 && prof_step == step;
            if (prof) cudaProfilerStart();
            double a = now();
            rc = backend_forward(be, &b, logits, err, sizeof err);
            if (prof) cudaProfilerStop();
            if (step >= WARM) {
                ts += now() - a;
                kv_read += (uint64_t)B * (uint64_t)(ctx + step + 1) * kv_tok;
            }
        }
        if (rc) {
            fprintf(stderr, "bench_cuda: decode batch %d: %s\n", B, err);
            break;
        }
        const int timed = STEPS - WARM;
        const double tps = (double)B * timed / ts;
        const double gbps = ((double)wstep * timed + (double)kv_read) / ts / 1e9;
        if (bi == 0) tps1 = tps;
        be->ops->get_info(be, &info); /* the graph of this batch's bucket was the last captured */
        if (ctx) printf("  (from position %d: weights and %.1f MB of KV per step read)\n", ctx,
                        (double)kv_read / timed / 1e6);
        printf("  decode batch %2d: %8.1f tok/s  step %.3f ms  %6.0f GB/s = %5.1f %% of copy, %5.1f %% of read bandwidth, graph %d nodes\n",
               B, tps, ts / timed * 1e3, gbps, 100.0 * gbps / bw, 100.0 * gbps / rbw, info.graph_nodes);
        if (bi > 0) printf("                   aggregate %.1fx batch %d\n", tps / tps1, batches[0]);
        if (js)
            fprintf(js, "%s{\"batch\": %d, \"tok_s\": %.1f, \"step_ms\": %.4f, \"gbps\": %.1f, "
                    "\"roofline_pct\": %.1f, \"read_roofline_pct\": %.1f, \"x_batch1\": %.2f, \"graph_nodes\": %d}",
                    bi ? ", " : "", B, tps, ts / timed * 1e3, gbps, 100.0 * gbps / bw, 100.0 * gbps / rbw,
                    tps / tps1, info.graph_nodes);
    }
    if (js) fprintf(js, "], \"f16_copy_bytes\": %llu, \"prefill\": [", (unsigned long long)info.f16_copy_bytes);
    const int lens[] = { 512, 4096 };
    for (int li = 0; li < 2 && rc == 0 && !getenv("BENCH_NO_PREFILL"); li++) {
        const int n = lens[li];
        int32_t *tok = malloc((size_t)n * 4), *pos = malloc((size_t)n * 4), *seq = calloc((size_t)n, 4);
        uint8_t *want = calloc((size_t)n, 1);
        for (int i = 0; i < n; i++) {
            tok[i] = (i * 7919) % nv;
            pos[i] = i;
        }
        want[n - 1] = 1;
        struct fwd_seq fs = { tables, n / BT };
        struct fwd_batch b = { n, tok, pos, seq, want, 1, &fs };
        double best = 1e30;
        for (int r = 0; r < 3 && rc == 0; r++) {
            double a = now();
            rc = backend_forward(be, &b, logits, err, sizeof err);
            double t = now() - a;
            if (r > 0 && t < best) best = t; /* first run warms up */
        }
        /* the rate cuBLAS reaches on this layer's products, and tern's own
         * rate counting the same FLOPs plus causal attention's */
        double gsec = 0, gflops = 0;
        const struct model_hparams *hp = &m->hp;
        const int gem = rc == 0 ? layer_gemm(hp, n, &gsec, &gflops) : -1;
        const double attn_flops = 2.0 * n * (double)n * hp->head_dim * hp->n_head;
        const double tern_tf = hp->n_layer * (gflops + attn_flops) / best / 1e12;
        const double blas_tf = gem == 0 && gsec > 0 ? gflops / gsec / 1e12 : 0;
        if (rc) fprintf(stderr, "bench_cuda: prefill %d: %s\n", n, err);
        else printf("  prefill %4d tokens: %8.0f tok/s (%.1f ms) = %.0f TFLOP/s; cuBLAS f16 on the layer's products %.0f TFLOP/s: %.1f %%\n",
                    n, n / best, best * 1e3, tern_tf, blas_tf, blas_tf > 0 ? 100.0 * tern_tf / blas_tf : 0);
        if (js && !rc) fprintf(js, "%s{\"tokens\": %d, \"tok_s\": %.0f, \"ms\": %.1f, \"tflops\": %.1f, "
                               "\"gemm_tflops\": %.1f, \"gemm_pct\": %.1f}", li ? ", " : "", n, n / best, best * 1e3,
                               tern_tf, blas_tf, blas_tf > 0 ? 100.0 * tern_tf / blas_tf : 0);
        free(tok);
        free(pos);
        free(seq);
        free(want);
    }
    if (js) fprintf(js, "]");
    if (rc == 0 && !getenv("BENCH_NO_KERNELS")) kernel_figures(type, &m->hp, js);
    if (js) {
        fprintf(js, ", \"ok\": %s}\n", rc ? "false" : "true");
        fclose(js);
    }
    free(logits);
    free(tables);
    backend_close(be);
    model_close(m);
    return rc ? 1 : 0;
}
